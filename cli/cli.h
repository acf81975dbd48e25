/* Shared helpers of the memtap command-line tool: error reporting in the one house style
 * ("memtap: FILE: what went wrong"), option parsing helpers, exit codes. */
#ifndef MEMTAP_CLI_H
#define MEMTAP_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memtap/format.h"

/* Exit codes shared by every subcommand. */
enum {
  MT_EXIT_OK = 0,
  MT_EXIT_FAILURE = 1, /* the input is malformed, or an operation failed */
  MT_EXIT_PARTIAL = 2, /* only part of the trace could be read (truncated, or damaged part-way) */
  MT_EXIT_USAGE = 64,  /* bad command line (sysexits EX_USAGE) */
};

/* Runs `memtap argv[1] argv[2] ...` (argv[0] is the program name) and returns its exit status.
 * It prints to the standard streams and may be called again in the same process. */
int mt_cli_run(int argc, char **argv);

#define MT_COMMAND(name, fn, summary) int fn(int argc, char **argv);
#include "commands.def"
#undef MT_COMMAND

/* Prints "memtap: <file>: <message>" to stderr; `file` may be NULL. On a terminal, control
 * characters other than newline and tab become '?' (as cli_out does on stdout), here and in the
 * other messages below. */
void cli_error(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "memtap: <file>: <err->message>" to stderr. */
void cli_report(const char *file, const mt_error *err);

/* Where and what the damage `damage` (the reader's error, for a trace read up to it) is, for the
 * warnings that follow what was read before it: "the trace is damaged at byte N (the rule
 * broken)", or, for a compressed trace, "the compressed trace is damaged at byte C: what is wrong
 * (... the decompressed trace ends at byte N)". */
void cli_damage_text(const mt_error *damage, char *text, size_t size);

/* Prints "memtap <cmd>: <message> (see memtap <cmd> --help)", one line; returns MT_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The usage error of a command given no TRACE, or more than one, after its options were parsed
 * (optind): it names the word an option took as its value when that left no TRACE. */
int cli_one_trace_expected(const char *cmd, int argc, char **argv);

/* getopt_long for the subcommands, without getopt's own messages: an unknown or ambiguous option,
 * a missing argument or an argument given to an option that takes none return '?', and
 * cli_bad_option then says which. `shortopts` is as getopt_long's (a leading '+' allowed). */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* Refuses the option cli_getopt last returned (one the command does not take, or one cli_getopt
 * refused): "memtap <cmd>: unknown option '--bogus' (see memtap <cmd> --help)", or "option '--from'
 * needs an argument", "ambiguous option '--in'", "option '--json' takes no argument".
 * Returns MT_EXIT_USAGE. */
int cli_bad_option(const char *cmd);

/* Reader warnings go to stderr as "memtap: <file>: warning: ..." (user = the file name). */
void cli_print_warning(void *user, int64_t offset, const char *message);

/* Opens `path` for reading with warnings printed to stderr; prints the error and returns NULL on
 * failure. */
mt_reader *cli_open_trace(const char *path, bool backtraces);

/* cli_open_trace for the analyses: a Go trace damaged or cut after its first generation is
 * converted up to the damage, with a warning, and *damaged set (a memtrace trace's damage is met
 * while reading it, by the analysis pass). */
mt_reader *cli_open_trace_partial(const char *path, bool backtraces, bool *damaged);

/* cli_open_trace_partial without backtraces or warnings (a Go trace's damage included), for a
 * pass that another over the same trace follows, which says them: each once. Errors are printed. */
mt_reader *cli_open_trace_unwarned(const char *path, bool *damaged);

/* Parses a whole decimal integer in [min, max]; false if `text` is not one. */
bool cli_parse_int(const char *text, long long min, long long max, long long *out);

/* CLOCK_MONOTONIC in microseconds, CLOCK_REALTIME in nanoseconds. */
int64_t cli_monotonic_us(void);
int64_t cli_realtime_ns(void);

/* Where recorders keep inflated copies of compressed debug files (mt_recorder_options): into
 * `out`, $XDG_CACHE_HOME/memtap, else ~/.cache/memtap (the XDG base directory rules); "" when
 * neither is set to an absolute path. Returns out. */
const char *cli_debug_cache_dir(char *out, size_t size);

#endif
