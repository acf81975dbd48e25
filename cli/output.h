/* Buffered standard output for commands that print a lot (dump prints hundreds of MB for large
 * traces), JSON string escaping shared by every --json output, and the one human-readable style of
 * numbers in text output (IEC units, grouped digits; JSON keeps exact numbers). */
#ifndef MEMTAP_CLI_OUTPUT_H
#define MEMTAP_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cli_out {
  char buf[1 << 16];
  size_t len;
  int fd;
  bool failed;   /* a write failed (EPIPE, disk full): the command should stop */
  int error;     /* errno of the write that failed */
  bool terminal; /* fd is a terminal: control characters are written as '?' */
} cli_out;

/* Names in a trace (functions, files, the executable) are whatever its writer put there, escape
 * sequences included. Written to a terminal, a control character other than newline and tab (and
 * DEL) is written as '?', as ls does, so that a crafted trace cannot drive the user's terminal;
 * written to a file or a pipe, every byte is kept. */

/* That rule on `n` bytes of `text`, in place: for text bound for a terminal (output.c, and the
 * messages on stderr, util.c). */
void out_defuse(char *text, size_t n);

void out_init(cli_out *o, int fd);
void out_bytes(cli_out *o, const void *data, size_t n);
void out_str(cli_out *o, const char *s);
void out_printf(cli_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line of a one-line-per-field listing (info's executable, context...): `label`, then `s` with
 * a newline or a carriage return in it written as the two characters \n or \r and a backslash as
 * \\, so that the field stays on its line in a pipe as on a terminal and reads back unambiguously,
 * then a newline. NULL writes an empty field. */
void out_line_field(cli_out *o, const char *label, const char *s);
/* Writes what is buffered; returns false if any write failed. */
bool out_flush(cli_out *o);

/* Writes what is buffered; if any write failed, prints "memtap: <stdout>: writing failed: REASON"
 * (the errno text) to stderr and returns false: the command's exit status should then be 1. */
bool out_finish(cli_out *o);

/* A JSON string literal (quotes included) for NUL-terminated bytes `s`. Bytes that are not valid
 * UTF-8 are written as \udcXX (XX = the byte), Python's "surrogateescape": no valid UTF-8 text
 * produces those code points, so the original bytes can be recovered exactly. */
void out_json_string(cli_out *o, const char *s);

/* Bytes in IEC units (1 KiB = 1024 B, as pprof and heaptrack print them) into buf: "832 B",
 * "1.0 KiB", "11.1 MiB", "103 MiB" (one decimal below 100). Never scientific notation. */
const char *out_format_bytes(double bytes, char buf[32]);

/* A count rounded to an integer (half away from zero, as the JSON outputs round), its digits
 * grouped by three from 1,000 on: "981,314". */
const char *out_format_count(double count, char buf[32]);

/* A whole number of bytes exactly, in the largest IEC unit that divides it: "16 B", "4 KiB",
 * "1 MiB" (size classes). */
const char *out_format_exact_bytes(int64_t bytes, char buf[32]);

/* A positive number such as a sampling rate in plain decimal, 6 significant digits, trailing
 * zeros dropped: 0.001, 1e-05 as "0.00001", 0.25. */
const char *out_format_decimal(double value, char buf[40]);

/* "s" unless `n` is 1: "%s object%s". */
const char *out_plural(double n);

#endif
