/* memtap/analysis.h: what a trace says about a program's memory (docs/analysis.md).
 *
 * One streaming pass over a trace (read through memtap/format.h) builds an mt_analysis: per
 * backtrace and per allocation site, what was allocated, what was freed, what is live at the end
 * and at the peak; the live heap over time; size and lifetime histograms; and, on request, the
 * bucketed cells the HTML report filters on. Memory grows with the live sampled objects and the
 * distinct backtraces, never with the number of events.
 *
 * Definitions (docs/analysis.md states them for users):
 *   - estimated bytes of n samples = n / rate × word_size / 8 (FORMAT.md §3);
 *   - estimated objects of one sampled block of w words = 1 / p, p = 1 − (1 − rate)^w, where w is
 *     the length plus the header word for OCaml minor/major blocks and the length for external
 * ones;
 *   - a backtrace is shown as frames (function, file, line), outermost first, after dropping frames
 *     whose function matches the `hide` regex and folding direct recursion (a run of consecutive
 *     frames of one function becomes its innermost frame) unless `no_fold`;
 *   - the allocation *site* is the innermost frame of that backtrace that has a source location;
 *     frames without one ($code) are skipped, a backtrace with none is the site of its innermost
 *     `$code`, and an empty one is the site "<no backtrace>";
 *   - the *peak* is the first moment the estimated live heap reaches its maximum;
 *   - a *temporary* allocation is freed before its domain allocates anything else (heaptrack's
 *     definition); it is only defined when every allocation is recorded (rate 1);
 *   - *leaks* are the objects still live at the end of the trace (or of the window).
 *
 * Everything here is owned by the mt_analysis and valid until mt_analysis_free. Nothing prints. */
#ifndef MEMTAP_ANALYSIS_H
#define MEMTAP_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"
#include "memtap/format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_analysis mt_analysis;

/* An amount of allocations: how many sampled objects the trace recorded, their samples, and the
 * estimated number of real objects they stand for. Bytes are derived from samples
 * (mt_analysis_bytes). */
typedef struct mt_amount {
  uint64_t objects;         /* sampled objects (allocation events) */
  uint64_t samples;         /* sum of their nsamples */
  double objects_estimated; /* sum of 1/p */
} mt_amount;

/* Reports progress: `position` bytes of `total` (-1 when unknown) read so far. */
typedef void (*mt_progress_fn)(void *user, int64_t position, int64_t total);

/* No window bound. */
#define MT_TIME_UNBOUNDED INT64_MIN

typedef struct mt_analysis_options {
  /* The time window, in µs since the trace's start; MT_TIME_UNBOUNDED for either end means the
   * start or the end of the trace. What is live at `from` is rebuilt (decoded without being
   * counted as allocated); events after `to` are not read. */
  int64_t from, to;
  const char *hide;        /* POSIX extended regex on function names: matching frames are dropped */
  bool no_fold;            /* keep direct recursion in backtraces */
  bool cells;              /* keep the report's cells (mt_analysis_cells) */
  mt_progress_fn progress; /* called every few hundred thousand events; may be NULL */
  void *progress_user;
  /* A checkpoint index file (docs/analysis.md, "Checkpoint index"), NULL for none. When the file
   * holds a checkpoint of this trace before `from`, the pass resumes there instead of decoding the
   * trace from its start; the checkpoints the pass goes by past the index's last one are added,
   * and the file is written anew (atomically) when it gains any. An index that does not match the
   * trace, or is damaged, is ignored and replaced; so is one whose checkpoint proves wrong once
   * resumed from (the trace read on from it does not decode): the pass then starts over from
   * where the reader stood, and gives what it gives without an index. Needs a reader on an
   * uncompressed file or on memory; other readers ignore it. */
  const char *index_path;
  int64_t index_interval; /* least trace bytes between checkpoints; 0: MT_INDEX_INTERVAL */
  /* A trace found damaged part-way (the reader's MT_E_MALFORMED) is analysed up to the damage:
   * mt_analysis_run then succeeds, the window ending at the last event read, and
   * mt_analysis_damage says where. Without it the damage fails the run. */
  bool partial;
} mt_analysis_options;

/* Default spacing of checkpoints: 8 MiB of trace (and always at least four times the size of the
 * previous checkpoint, so that an index stays under a quarter of its trace). */
#define MT_INDEX_INTERVAL (INT64_C(8) << 20)

/* What a pass did with its checkpoint index. */
typedef struct mt_index_use {
  bool resumed;           /* started from a checkpoint instead of the trace's start */
  int64_t resumed_offset; /* the trace byte offset it resumed at */
  int64_t resumed_time;   /* the latest event time before that checkpoint, µs since the start */
  size_t checkpoints;     /* in the index after the pass */
  size_t added;           /* checkpoints this pass added */
  bool written;           /* the index file was written */
  char problem[320];      /* why an existing index was not used, or could not be written; "" */
} mt_index_use;

/* With options.partial, the reader's error where the pass stopped on a damaged trace (its offset
 * is the byte where the damage was found); NULL when the trace was read without error. */
const mt_error *mt_analysis_damage(const mt_analysis *a);

/* Options with no window, no hiding, recursion folded, no cells. */
mt_analysis_options mt_analysis_default_options(void);

/* Reads every remaining event of `r` (which must have been opened with backtraces) and builds the
 * analysis. The trace's rate must be in (0, 1]: anything else is MT_E_INVALID, not a division.
 * A bad `hide` regex is MT_E_INVALID. The reader may be closed afterwards. */
int mt_analysis_run(mt_analysis **out, mt_reader *r, const mt_analysis_options *options,
                    mt_error *err);

/* Frees the analysis. Safe on NULL. */
void mt_analysis_free(mt_analysis *a);

/* What the pass did with options.index_path (all zero without one). */
const mt_index_use *mt_analysis_index_use(const mt_analysis *a);

/* The duration of `r`'s trace (µs from its start to its last event) as its checkpoint index at
 * `index_path` knows it once a pass has read the whole trace; -1 when it does not (no index, not
 * this trace's, damaged, or no pass read it all). Saves a pass for windows given in percent. */
int64_t mt_index_trace_duration(const char *index_path, const mt_reader *r);

/* ---------------------------------------------------------------------------------------------
 * The whole trace
 * ------------------------------------------------------------------------------------------- */

/* Sources by meaning: OCaml's heaps, or for traces memtap records (runtime parameters starting
 * with "memtap") the malloc heap (External) and mapped regions (Major). */
const char *mt_analysis_source_name(const mt_analysis *a, mt_source source);

/* Size classes (by estimated bytes of one object) and lifetime classes used by the histograms and
 * by the report's cells. */
#define MT_SIZE_CLASSES 10
#define MT_LIFETIME_CLASSES 10
/* Upper bound in bytes of size class i (the last is unbounded: INT64_MAX). */
int64_t mt_size_class_limit(int i);
/* Upper bound in µs of lifetime class i; the class MT_LIFETIME_CLASSES-1 is "not freed". */
int64_t mt_lifetime_class_limit(int i);

/* The longest time an analysis counts, in µs (2^53, about 285 years): exact in a double, and far
 * enough from INT64_MAX that sums of times and widths cannot overflow. */
#define MT_ANALYSIS_TIME_MAX ((int64_t)1 << 53)
/* The shown frames of one backtrace at most (after folding direct recursion): a crafted trace's
 * prediction runs can spell millions of frames in a few bytes. */
#define MT_ANALYSIS_SHOWN_DEPTH_MAX 65536
/* µs from `start` to `time` as analyses count them: 0 for a time before the start, at most
 * MT_ANALYSIS_TIME_MAX. A damaged or crafted trace's times may be anything. */
int64_t mt_analysis_elapsed(int64_t time, int64_t start);

typedef struct mt_summary {
  mt_trace_info info; /* strings owned by the analysis */
  int64_t end_time;   /* the last event read, µs since the epoch (start_time if none) */
  bool truncated;     /* read to its end, which was cut mid-packet: the rest of it is missing */
  /* The window has an end (options.to) that the trace goes on past: the pass stopped there. */
  bool stopped_at_to;
  /* Allocations whose backtrace has more than MT_ANALYSIS_SHOWN_DEPTH_MAX shown frames (after
   * folding): only the outermost that many are shown. */
  uint64_t cut_backtraces;
  int64_t from, to;        /* the window actually analysed, µs since the trace start */
  double bytes_per_sample; /* word_size / 8 / rate */
  mt_amount allocated;     /* in the window */
  mt_amount allocated_by_source[3];
  mt_amount freed;      /* objects freed in the window (allocated in it or before) */
  mt_amount live_start; /* live when the window starts (0 without a window) */
  mt_amount live_end;   /* live at the end: leaks */
  mt_amount live_end_by_source[3];
  mt_amount at_peak;         /* live at the peak */
  int64_t peak_time;         /* µs since the trace start */
  uint64_t promotes;         /* in the window */
  uint64_t collects;         /* in the window */
  uint64_t unknown_collects; /* collects (or promotes) of ids never allocated: ignored */
  bool temporary_defined;    /* rate == 1 */
  mt_amount temporary;
  mt_amount sizes[MT_SIZE_CLASSES];         /* allocations in the window by size class */
  mt_amount lifetimes[MT_LIFETIME_CLASSES]; /* allocations in the window by lifetime class */
  uint64_t distinct_backtraces;             /* distinct shown backtraces with allocations */
  uint64_t sites;                           /* distinct sites of those backtraces */
} mt_summary;

const mt_summary *mt_analysis_summary(const mt_analysis *a);

/* Estimated bytes of `samples` samples (samples / rate × word bytes). */
double mt_analysis_bytes(const mt_analysis *a, uint64_t samples);

/* The live heap over time: `count` buckets of equal width starting at summary.from. */
typedef struct mt_timeline_bucket {
  double live_max;         /* estimated bytes: the largest live heap inside the bucket */
  double live_end;         /* at the bucket's end */
  double allocated, freed; /* estimated bytes allocated / freed inside the bucket */
} mt_timeline_bucket;

/* The buckets (at most 1024), their width in µs (a power of two). */
const mt_timeline_bucket *mt_analysis_timeline(const mt_analysis *a, size_t *count, int64_t *width);

/* ---------------------------------------------------------------------------------------------
 * Backtraces and sites
 * ------------------------------------------------------------------------------------------- */

/* One frame as shown: a function at a source line. `$<code>` frames have file "" and line 0. */
typedef struct mt_frame {
  const char *function;
  const char *file;
  int32_t line;
} mt_frame;

/* What happened to the allocations of one backtrace or one group. */
typedef struct mt_stats {
  mt_amount allocated;
  mt_amount freed;
  mt_amount live_start; /* live at the window's start */
  mt_amount live;       /* live at the end */
  mt_amount peak;       /* live at the peak */
  mt_amount temporary;
  uint8_t sources; /* bit s set: some allocation had source s */
} mt_stats;

/* Distinct backtraces with allocations (or live objects), numbered 0 .. count-1. */
size_t mt_analysis_stack_count(const mt_analysis *a);
/* Frames of stack `stack`, outermost first, and their number. Borrowed: valid until the next call
 * of mt_analysis_stack_frames. When `inlined` is non-NULL it receives a parallel array (borrowed
 * the same way): inlined[i] is true when frame i was inlined into frame i-1 (both came from one
 * return address, FORMAT.md §2.6). */
const uint32_t *mt_analysis_stack_frames(const mt_analysis *a, size_t stack, size_t *depth,
                                         const bool **inlined);
const mt_stats *mt_analysis_stack_stats(const mt_analysis *a, size_t stack);
/* The site frame of a stack (an index for mt_analysis_frame), or UINT32_MAX for "<no backtrace>".
 */
uint32_t mt_analysis_stack_site(const mt_analysis *a, size_t stack);
/* A frame by its index. */
mt_frame mt_analysis_frame(const mt_analysis *a, uint32_t frame);

typedef enum mt_metric {
  MT_METRIC_BYTES = 0, /* estimated bytes allocated */
  MT_METRIC_COUNT,     /* estimated objects allocated */
  MT_METRIC_LIVE,      /* estimated bytes live at the end */
  MT_METRIC_PEAK,      /* estimated bytes live at the peak */
  MT_METRIC_TEMPORARY, /* estimated bytes of temporary allocations */
} mt_metric;

/* The value a metric ranks by, from stats. */
double mt_analysis_metric(const mt_analysis *a, const mt_stats *s, mt_metric metric);

typedef enum mt_group_by {
  MT_GROUP_SITE = 0, /* (function, file, line) of the site */
  MT_GROUP_FUNCTION, /* function of the site */
  MT_GROUP_FILE,     /* file of the site */
} mt_group_by;

typedef struct mt_group {
  mt_frame key; /* the unused parts are "" / 0 */
  mt_stats stats;
  size_t top_stack; /* the group's stack with the largest value of the metric */
  size_t stacks;    /* how many stacks the group has */
} mt_group;

/* Groups stacks by site, function or file and ranks the groups by `metric`, largest first, ties
 * broken by key; groups whose metric is 0 are left out. `*groups` is malloc'd: the caller frees.
 * MT_E_UNSUPPORTED for MT_METRIC_TEMPORARY when the rate is not 1. */
int mt_analysis_group(const mt_analysis *a, mt_group_by by, mt_metric metric, mt_group **groups,
                      size_t *count, mt_error *err);

/* ---------------------------------------------------------------------------------------------
 * Report cells: (stack, allocation-time bucket, free-time bucket, size class) -> amount
 * ------------------------------------------------------------------------------------------- */

#define MT_CELL_TIME_BUCKETS 64
#define MT_CELL_NEVER 255  /* free bucket of objects not freed */
#define MT_CELL_BEFORE 255 /* alloc bucket of objects allocated before the window */
#define MT_CELL_LIMIT 100000

typedef struct mt_cell {
  uint32_t stack;
  uint8_t alloc_bucket; /* 0..MT_CELL_TIME_BUCKETS-1, or MT_CELL_BEFORE */
  uint8_t free_bucket;  /* 0..MT_CELL_TIME_BUCKETS-1, or MT_CELL_NEVER */
  uint8_t size_class;
  uint8_t lifetime_class; /* MT_LIFETIME_CLASSES-1 when not freed */
  mt_amount amount;
} mt_cell;

/* The cells and the width in µs of their time buckets, which start at summary.from. Requires
 * options.cells. The time buckets widen while there are more than MT_CELL_LIMIT cells, until one
 * bucket spans the window; past that the cells grow with the distinct backtraces (at most
 * 2 × 2 × MT_SIZE_CLASSES × MT_LIFETIME_CLASSES per backtrace), and the HTML report merges
 * backtraces and classes to keep its own cap (docs/analysis.md). */
const mt_cell *mt_analysis_cells(const mt_analysis *a, size_t *count, int64_t *width);

/* ---------------------------------------------------------------------------------------------
 * The largest allocations (for instant events in the Chrome trace export)
 * ------------------------------------------------------------------------------------------- */

#define MT_LARGEST_ALLOCATIONS 100

typedef struct mt_allocation {
  int64_t time; /* µs since the trace start */
  int64_t words;
  uint64_t samples;
  uint32_t stack;
  mt_source source;
} mt_allocation;

/* The MT_LARGEST_ALLOCATIONS largest allocations of the window by length, in time order. */
const mt_allocation *mt_analysis_largest(const mt_analysis *a, size_t *count);

#ifdef __cplusplus
}
#endif
#endif
