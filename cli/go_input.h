/* Go execution traces where the CLI expects a memtrace trace (docs/go.md): any command that reads
 * a trace file also takes a Go trace, recognised by its header and converted first. */
#ifndef MEMTAP_CLI_GO_INPUT_H
#define MEMTAP_CLI_GO_INPUT_H

#include <stdbool.h>

#include "memtap/format.h"

/* Whether the named file (not "-") starts with a Go execution trace header. */
bool cli_is_go_trace(const char *path);

/* Converts the Go trace `path` (memtap/import.h, all kinds, start time from the file's mtime)
 * into an unlinked temporary file in $TMPDIR (default /tmp) and opens a reader on it, which keeps
 * the only reference to it. Conversion warnings go where the reader's do (`options`, none without
 * an on_warning), errors are printed as "memtap: PATH: ..."; NULL on failure. With `damaged`
 * non-NULL, a Go trace damaged (or cut) after its first generation is not a failure: the
 * generations converted before the damage are read, the damage is a warning and *damaged set (for
 * the analyses, which then exit 2). */
mt_reader *cli_open_go_trace(const char *path, const mt_reader_options *options, bool *damaged);

#endif
