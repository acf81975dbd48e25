/* Helpers shared by the analysis subcommands (summary, top, leaks, timeline, flame, diff, report,
 * export): the options they all take (--from, --to, --hide, --no-fold), loading a trace into an
 * mt_analysis with a progress bar, and printing amounts, sizes and frames. */
#ifndef MEMTAP_CLI_ANALYSIS_CLI_H
#define MEMTAP_CLI_ANALYSIS_CLI_H

#include <getopt.h>
#include <stdbool.h>

#include "memtap/analysis.h"
#include "output.h"

/* Exit status of `leaks --fail-above` when the leak estimate is above the limit. */
#define MT_EXIT_THRESHOLD 3

/* Whether to use TRACE.idx, the checkpoint index (docs/analysis.md). */
typedef enum an_index_mode {
  AN_INDEX_AUTO = 0, /* use it if it exists; make it for a window on a trace of >= 64 MiB */
  AN_INDEX_ON,       /* --index: use it, make it whatever the trace's size */
  AN_INDEX_OFF,      /* --no-index */
} an_index_mode;

/* Traces from this size on get a checkpoint index on their first windowed analysis. */
#define AN_INDEX_MIN_TRACE (INT64_C(64) << 20)

/* --hide patterns kept; more are refused (an_load). */
#define AN_MAX_HIDE 32

typedef struct an_options {
  const char *from, *to;         /* as given: seconds, or N% of the trace */
  const char *hide[AN_MAX_HIDE]; /* every --hide: a frame is dropped if any matches */
  int nhide;                     /* how many were given (more than AN_MAX_HIDE: refused) */
  bool no_fold;
  bool json;
  an_index_mode index;
  bool index_both; /* --index and --no-index both given: refused */
} an_options;

/* getopt_long entries for the shared options; their codes are the AN_OPT_* values. */
enum {
  AN_OPT_FROM = 1000,
  AN_OPT_TO,
  AN_OPT_HIDE,
  AN_OPT_NO_FOLD,
  AN_OPT_JSON,
  AN_OPT_INDEX,
  AN_OPT_NO_INDEX
};
#define AN_LONG_OPTIONS                                                                            \
  {"from", required_argument, NULL, AN_OPT_FROM}, {"to", required_argument, NULL, AN_OPT_TO},      \
      {"hide", required_argument, NULL, AN_OPT_HIDE},                                              \
      {"no-fold", no_argument, NULL, AN_OPT_NO_FOLD}, {"json", no_argument, NULL, AN_OPT_JSON},    \
      {"index", no_argument, NULL, AN_OPT_INDEX},                                                  \
      {"no-index", no_argument, NULL, AN_OPT_NO_INDEX}, {                                          \
    "help", no_argument, NULL, 'h'                                                                 \
  }

/* The usage lines of the shared options. */
#define AN_USAGE_WINDOW                                                                            \
  "  --from T, --to T  analyse only this window: T in seconds since the trace's start, or N%\n"    \
  "                    of the trace; what is live at --from is rebuilt, later events are not "     \
  "read\n"                                                                                         \
  "  --index           resume windows from TRACE.idx, a checkpoint index made on first use\n"      \
  "                    (default: only for traces of 64 MiB or more, or if TRACE.idx exists)\n"     \
  "  --no-index        never read or write TRACE.idx\n"
#define AN_USAGE_STACKS                                                                            \
  "  --hide REGEX      drop frames whose function matches REGEX (allocator wrappers)\n"            \
  "  --no-fold         keep direct recursion (f -> f -> f) in backtraces\n"

/* Handles a shared option; false if `c` is not one. */
bool an_option(an_options *o, int c, const char *arg);

/* Parses OPTION's argument, a time (seconds, or N% of a trace of `duration_us`), into *us. On
 * failure prints a usage error, "OPTION takes `forms`, not 'x'" for a malformed time or the range
 * for a number outside it (over 100%, over AN_MAX_SECONDS), and returns false. */
#define AN_MAX_SECONDS 9e12
bool an_time_arg(const char *cmd, const char *option, const char *forms, const char *text,
                 int64_t duration_us, int64_t *us);

/* Opens TRACE, analyses it with the shared options (and `cells` for the report and the timeline);
 * on failure prints the error, stores the exit status (usage or failure) in *status and returns
 * NULL. `to_override`, when not MT_TIME_UNBOUNDED, replaces --to (export --at). */
mt_analysis *an_load(const char *cmd, const char *path, const an_options *o, bool cells,
                     int64_t to_override, int *status);

/* A command's failure after loading `a`: prints `err` about `path`, frees `a` and returns
 * MT_EXIT_FAILURE. */
int an_fail(const char *path, const mt_error *err, mt_analysis *a);

/* A command's exit status once it has printed `a`: MT_EXIT_PARTIAL instead of MT_EXIT_OK when
 * the trace was damaged part-way or cut mid-packet (the reader or an_load printed the warning). */
int an_status(const mt_analysis *a, int status);

/* The end of a trace in µs since its start: from its checkpoint index when `use_index` and that
 * knows it, else by a pass without backtraces; -1 on error (printed). */
int64_t an_trace_duration(const char *path, bool use_index);

/* "11.1 MiB": out_format_bytes (IEC units). */
const char *an_size(double bytes, char buf[32]);

/* Whether the trace records every allocation (sampling rate 1, `memtap record --full`): its counts
 * and sizes are exact, not estimates, and the text says so (no "sampled", no "~"). */
bool an_exact(const mt_analysis *a);

/* "~" before an estimated figure, "" in an exact trace. */
const char *an_approx(const mt_analysis *a);

/* An amount for text: "1,024 sampled objects, 1,030 samples, ~8.0 MiB, ~1,043,200 objects", or in
 * an exact trace "1,024 objects, 8.0 MiB". */
const char *an_amount_text(const mt_analysis *a, const mt_amount *m, char buf[160]);

/* A metric's value for text: "981,314 objects" for count, else bytes ("11.1 MiB"). */
const char *an_metric_text(mt_metric metric, double value, char buf[48]);

/* A metric's value in a table column whose header names the unit: a bare count of objects for
 * count ("981,314"), else bytes. */
const char *an_metric_cell(mt_metric metric, double value, char buf[48]);

/* A metric's value over the whole trace (or window): the summary's totals. */
double an_whole(const mt_analysis *a, mt_metric metric);

/* Whether `regex` is a valid POSIX extended regex; if not, prints "bad OPTIONregular expression
 * 'REGEX': why" as `cmd`'s usage error (a bad regex is a bad command line, whatever the trace).
 * `option` is "--focus " or "" (for an operand). */
bool an_regex_valid(const char *cmd, const char *option, const char *regex);

/* Writes an amount as a JSON object: objects, samples, bytes, objects_estimated (integers). */
void an_json_amount(cli_out *o, const mt_analysis *a, const mt_amount *m);

/* "function file:line" for a frame: "function file" when it has no line (a native frame
 * without line tables, whose file is its module), only the function for $code frames. */
void an_print_frame(cli_out *o, mt_frame f);

/* The modules of shown sites that had no symbols when recorded (frames "module+0x1234"), for one
 * note each after a listing: what to install to get names. Their names point into the trace. */
#define AN_UNSYMBOLISED_MAX 4
typedef struct an_unsymbolised {
  const char *modules[AN_UNSYMBOLISED_MAX];
  size_t count;
} an_unsymbolised;
void an_note_unsymbolised(an_unsymbolised *u, mt_frame site);
void an_print_unsymbolised(cli_out *o, const an_unsymbolised *u);

/* A frame as a JSON object {"function", "file", "line"}. */
void an_json_frame(cli_out *o, mt_frame f);

/* Parses --by / --group values; false if unknown. */
bool an_parse_metric(const char *text, mt_metric *metric);
bool an_parse_group(const char *text, mt_group_by *by);
const char *an_metric_name(mt_metric metric);

/* The same for a command's options, printing `cmd`'s usage error when false: --by METRIC,
 * --group BY, and an OPTION taking a count of 0 or more ("-n takes a count (0 or more), not 'x'").
 */
bool an_metric_arg(const char *cmd, const char *arg, mt_metric *metric);
bool an_group_arg(const char *cmd, const char *arg, mt_group_by *by);
bool an_count_arg(const char *cmd, const char *option, const char *arg, long long *count);

#endif

#ifndef MEMTAP_CLI_ANALYSIS_CLI_GROUPS
#define MEMTAP_CLI_ANALYSIS_CLI_GROUPS
/* Prints a stack's frames, one per line with `indent`, outermost first (or, `inverted`, the
 * allocation point first), at most `max_frames` of them (0: all). */
void an_print_stack(cli_out *o, const mt_analysis *a, size_t stack, bool inverted,
                    size_t max_frames, const char *indent);
/* A stack as a JSON array of frames, in the same order. */
void an_json_stack(cli_out *o, const mt_analysis *a, size_t stack, bool inverted);
#endif

#ifndef MEMTAP_CLI_ANALYSIS_CLI_EXPORT
#define MEMTAP_CLI_ANALYSIS_CLI_EXPORT
#include "memtap/export.h"
#include "output_file.h"
/* Exports `a` to `out` (opened by cli_output_file_open, closed here: kept only if the export
 * succeeded); prints errors; returns an exit status. `path` names the trace in messages. */
int an_export_to(const mt_analysis *a, mt_export_format format, const mt_export_options *eo,
                 cli_output_file *out, const char *path);
#endif

#ifndef MEMTAP_CLI_ANALYSIS_CLI_WINDOW
#define MEMTAP_CLI_ANALYSIS_CLI_WINDOW
/* The header line of a command given --from or --to: "window: 0.000035 s to 0.000075 s
 * (0.000040 s)\n", the window analysed (summary.from/to); nothing without a window. */
void an_print_window(cli_out *o, const an_options *ao, const mt_analysis *a);
/* The same as a JSON member, with a leading comma: ,"window":{"from_s","to_s"} or ,"window":null.
 */
void an_json_window(cli_out *o, const an_options *ao, const mt_analysis *a);
#endif
