/* Helpers shared by the test programs: finding the shared testdata, temporary files, running the
 * memtap CLI, reading whole files, hashing. */
#ifndef MEMTAP_TESTUTIL_H
#define MEMTAP_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* The testdata directory: $MEMTAP_TESTDATA, else ../shared/testdata. */
const char *tu_testdata_dir(void);

/* "<testdata>/<relative>" in a static buffer (one of 8 rotating). If the file is missing: under
 * CI=true the test fails; otherwise it is skipped. */
const char *tu_testdata(const char *relative);

/* Reads a whole file (*size bytes, followed by a NUL that *size does not count, so that a text
 * file can be searched as a string); the caller frees. Fails the test if it cannot. */
uint8_t *tu_read_file(const char *path, size_t *size);

/* Writes `size` bytes to `path`, replacing it. */
void tu_write_file(const char *path, const void *data, size_t size);

/* A fresh directory under $TMPDIR for this test process (removed at exit), and a path inside it. */
const char *tu_temp_dir(void);
const char *tu_temp_path(const char *name);

/* Runs `memtap ARGS...` ($MEMTAP_CLI) with stdout/stderr captured to files; returns the exit status
 * (128+signal if killed). *out and *err (if non-NULL) receive malloc'd NUL-terminated output. */
int tu_run_cli(char **out, size_t *out_size, char **err, const char *arg0, ...);

/* The same with stdout written to `out_path` (for outputs of hundreds of MB). */
int tu_run_cli_to_file(const char *out_path, char **err, const char *arg0, ...);

/* The same with stdout and stderr on a terminal, as in an interactive session (a pseudo-terminal
 * in raw mode; its output must fit the terminal's buffer, a few KiB). *out receives what was
 * written to it, both streams. */
int tu_run_cli_on_terminal(char **out, const char *arg0, ...);

/* Lowercase hex sha256 of bytes, or of a file read in chunks (65-byte buffer). */
void tu_sha256_hex(const void *data, size_t size, char hex[65]);
void tu_sha256_file(const char *path, char hex[65]);

/* The value of "key: value" line in a file (e.g. "dump sha256" of a .ref file), malloc'd, or NULL.
 */
char *tu_ref_field(const char *ref_path, const char *key);

/* Whether `text` (NUL-terminated) is exactly one valid JSON value (RFC 8259), surrounding white
 * space allowed. On failure *error_at (if non-NULL) is the offset of the first bad byte. */
bool tu_json_valid(const char *text, size_t *error_at);

/* The number after "\"key\":" in JSON text (first occurrence), as a double; fails the test if
 * absent. Good enough for flat fields of the CLI's --json outputs. */
double tu_json_number(const char *json, const char *key);

#endif
