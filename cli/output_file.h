/* The named output of a command that writes a file (copy OUT, report/export/flame -o): one
 * implementation of the rules every such command keeps (docs/cli.md, "Output files"):
 *   - an output that is one of the command's inputs (same device and inode, whatever the path) is
 *     refused before anything is written;
 *   - a regular file is written to a temporary file in the same directory, renamed into place
 *     when the command succeeds (keeping an existing file's mode), and removed otherwise, also on
 *     SIGINT, SIGTERM, SIGHUP and SIGXFSZ: a failed run leaves an existing file as it was;
 *   - devices, pipes and "-" (standard output) are written directly; text bound for a terminal
 *     has its control characters defused as all text output's are (output.h), and binary output
 *     (a trace, a pprof profile) is not written to a terminal at all.
 * One temporary file at a time (a command has one output). */
#ifndef MEMTAP_CLI_OUTPUT_FILE_H
#define MEMTAP_CLI_OUTPUT_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct cli_output_file {
  const char *name; /* for messages: the path as given, or "<stdout>" */
  int fd;           /* where to write; -1 once closed */
  FILE *stream;     /* cli_output_file_stream's, or NULL */
  bool is_stdout;
  bool terminal;        /* standard output, and a terminal */
  bool temporary;       /* fd is a temporary file, to be renamed to `final` */
  char final[PATH_MAX]; /* the file the temporary one replaces (symbolic links resolved) */
} cli_output_file;

/* Opens `path` ("-" or NULL: standard output) as the output of a command reading `inputs`
 * (`ninputs` paths, "-" for standard input). Prints "memtap: PATH: ..." and returns false if the
 * output is one of the inputs or cannot be created. Open it before reading the inputs, so that a
 * bad output is found before a long analysis. */
bool cli_output_file_open(cli_output_file *o, const char *path, const char *const *inputs,
                          size_t ninputs);

/* A stdio stream on the output (stdout itself for standard output; on a terminal, a stream that
 * writes to it with control characters defused); NULL, printed, on failure. */
FILE *cli_output_file_stream(cli_output_file *o);

/* For `command`'s binary output (`what`, like "a trace"): false, with a usage error printed, when
 * the output is a terminal, where the bytes would be noise at best and terminal commands at worst;
 * the output is then closed. True otherwise. */
bool cli_output_file_binary(cli_output_file *o, const char *command, const char *what);

/* Ends the output. With `keep`, flushes and closes it and renames a temporary file into place;
 * returns false, printed, if any of that fails, the temporary file then being removed. Without
 * `keep`, removes a temporary file (an existing file keeps its content) and returns false.
 * Standard output is flushed, never closed. */
bool cli_output_file_close(cli_output_file *o, bool keep);

#endif
