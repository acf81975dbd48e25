/* The inside of an mt_analysis (memtap/analysis.h), shared by the files of src/analysis:
 *   - stacks.c: frames, the frame trie (backtraces as shown: hidden frames dropped, recursion
 *     folded), sites;
 *   - pass.c: the streaming pass (live set, peak, windows, temporaries);
 *   - timeline.c: the live heap over time; cells.c: the report's cells;
 *   - groups.c: grouping and ranking; estimate.c: estimates, classes, source names. */
#ifndef MEMTAP_SRC_ANALYSIS_MODEL_H
#define MEMTAP_SRC_ANALYSIS_MODEL_H

#include <regex.h>

#include "analysis/code_trie.h"
#include "analysis/idmap.h"
#include "analysis/pairmap.h"
#include "common/arena.h"
#include "common/hashmap.h"
#include "common/indexmap.h"
#include "memtap/analysis.h"

#define MT_TIMELINE_BUCKETS 1024
#define MT_ESTIMATE_CACHE 4096
#define MT_RUN_STEPS 1024 /* the memo of frame trie steps by runs (stacks.c) */

typedef struct frame_node {
  uint32_t parent;
  uint32_t frame;
  uint32_t depth : 31;
  uint32_t inlined : 1; /* inlined into the parent frame (same return address) */
  uint32_t stack;       /* the stack ending here, UINT32_MAX if none */
} frame_node;

typedef struct stack_rec {
  uint32_t fnode; /* frame trie node */
  uint32_t site;  /* frame index, UINT32_MAX for "<no backtrace>" */
  bool dirty;     /* live changed since the last peak snapshot */
  mt_stats stats;
} stack_rec;

typedef struct live_obj {
  int64_t time;  /* µs since the trace start */
  int64_t words; /* the length */
  uint64_t samples;
  uint32_t stack;
  uint16_t domain;
  uint8_t source;
  bool before;        /* allocated before the window */
  uint32_t code_node; /* its backtrace in the code trie, while checkpoints are kept */
} live_obj;

typedef struct domain_state {
  /* The previous backtrace, run by run (mt_event.backtrace_runs), with the frame trie node that
   * its runs up to this one are shown as. */
  struct shown_run {
    mt_backtrace_run run;
    uint32_t fnode;
  } * runs;
  size_t nruns, runs_cap;
  int64_t last_alloc; /* id of the domain's last allocation, -1 if none */
  /* The previous backtrace in the code trie, run by run. */
  struct code_run {
    uint32_t node;  /* a code trie node */
    uint32_t start; /* the position of its first code in the backtrace */
  } * code_run;
  size_t code_runs, code_run_cap;
} domain_state;

struct mt_analysis {
  mt_summary summary;
  mt_arena arena; /* strings, frames */
  mt_reader *reader;
  bool memtap_trace;
  double rate, word_bytes;
  double estimates[MT_ESTIMATE_CACHE]; /* objects per sampled block of w words, 0 until needed */

  /* stacks.c */
  bool fold, has_hide;
  regex_t hide;
  mt_frame *frames;
  size_t nframes, frames_cap;
  mt_hashmap frame_index;  /* content hash -> frame index */
  mt_hashmap string_index; /* content hash -> interned string (a pointer) */
  mt_hashmap code_frames;  /* code -> (offset << 8 | count) into frame_list */
  uint32_t *frame_list;
  size_t nframe_list, frame_list_cap;
  frame_node *fnodes;
  size_t nfnodes, fnodes_cap;
  mt_pairmap fnode_children;
  mt_pairmap code_steps; /* (frame node, code) -> frame node after the code's frames */
  struct run_step {      /* direct-mapped: from + code's frames -> to (stacks.c) */
    int64_t code;
    uint32_t from, to;
    bool fixed; /* to + code's frames -> to */
  } run_steps[MT_RUN_STEPS];
  stack_rec *stacks;
  size_t nstacks, stacks_cap;
  uint32_t *scratch; /* path buffers */
  size_t scratch_cap;
  uint32_t *shown; /* frame-stack materialisation for mt_analysis_stack_frames */
  bool *shown_inlined;
  size_t shown_cap, shown_inlined_cap;

  /* pass.c */
  mt_idmap live_index; /* object id -> index in live */
  live_obj *live;
  size_t nlive, live_cap;
  uint32_t *live_free; /* free slots */
  size_t nlive_free, live_free_cap;
  domain_state *domains; /* indexed by domain */
  size_t ndomains;
  uint32_t *dirty;
  size_t ndirty, dirty_cap;
  uint64_t live_samples, peak_samples;
  double live_objects_est;
  bool in_window;

  mt_allocation largest[MT_LARGEST_ALLOCATIONS]; /* a min-heap by words during the pass */
  size_t nlargest;

  /* timeline.c */
  mt_timeline_bucket timeline[MT_TIMELINE_BUCKETS];
  int64_t tl_width;
  size_t tl_current; /* the bucket of the last change */
  int64_t tl_next;   /* where the current bucket ends (µs since the start; INT64_MIN: unknown) */
  bool want_cells;
  mt_indexmap cell_index; /* packed key -> index in cells */
  mt_cell *cells;
  size_t ncells, cells_cap;
  int64_t cell_width;
  int64_t cell_last;         /* the latest time the cells' steps must reach */
  struct cell_obj *cell_log; /* objects not counted in the cells yet (cells.c) */
  size_t ncell_log, cell_log_cap;

  /* index.c */
  struct mt_index *index; /* NULL without options.index_path */
  bool keep_checkpoints;  /* the pass may add checkpoints: keep the code trie */
  int64_t checkpoint_due; /* trace offset from which the next checkpoint may be taken */
  mt_code_trie code_trie;
  mt_index_use index_use;

  /* pass.c: where options.partial stopped the pass on a damaged trace (code 0: read whole). */
  mt_error damage;
  /* stacks.c: a backtrace met a code no location event described (FORMAT.md §6), this one. */
  bool undescribed;
  int64_t undescribed_code;
  /* What backtraces may cost (a crafted trace's prediction runs spell millions of frames in a
   * few bytes): shown frames past MT_ANALYSIS_SHOWN_DEPTH_MAX are dropped (summary.cut_backtraces
   * counts the backtraces cut), and past fnodes_budget frame trie nodes the analysis stops. */
  size_t fnodes_budget;
  bool over_budget;
};

/* stacks.c */
int mt_stacks_init(mt_analysis *a, const mt_analysis_options *options, mt_error *err);
void mt_stacks_free(mt_analysis *a);
/* The stack (stack_rec index) an allocation's backtrace is shown as, using and updating the
 * domain's previous backtrace. UINT32_MAX when memory runs out. */
uint32_t mt_stacks_intern(mt_analysis *a, domain_state *d, const mt_event *ev);
/* The frame trie node of `from` followed by the frames of `code` (UINT32_MAX: out of memory). */
uint32_t mt_stacks_extend(mt_analysis *a, uint32_t from, int64_t code);
/* The stack ending at frame trie node `fnode`, made if new (UINT32_MAX: out of memory). */
uint32_t mt_stacks_of_fnode(mt_analysis *a, uint32_t fnode);

/* timeline.c */
void mt_timeline_init(mt_analysis *a, bool cells);
void mt_timeline_free(mt_analysis *a);
/* The live heap changed at `t` (µs since the start) by `allocated` / `freed` estimated bytes. */
void mt_timeline_change(mt_analysis *a, int64_t t, double allocated, double freed);
/* Extends the timeline to `t` and fixes its length. */
void mt_timeline_finish(mt_analysis *a, int64_t t);
/* cells.c */
/* Adds an object to the cells; free_time < 0 means not freed. False when memory runs out. */
bool mt_cells_add(mt_analysis *a, const live_obj *o, int64_t free_time, double objects_est);
/* Makes sure the cells' grid reaches `t` (by the time objects are counted). False when memory
 * runs out. */
bool mt_cells_reach(mt_analysis *a, int64_t t);
/* Counts the objects added so far in the cells (at the end of the pass). False when memory runs
 * out. */
bool mt_cells_flush(mt_analysis *a);
void mt_cells_free(mt_analysis *a);

/* index.c: the checkpoint index (TRACE.idx). */
/* mt_index_begin's answer when a checkpoint does not fit the trace once applied (noted in
 * index_use.problem): the reader and the pass have moved, so the pass must start over from where
 * the reader stood, without the index. */
#define MT_INDEX_START_OVER 1
/* Opens options->index_path if set: resumes `r` and the live set from the best checkpoint before
 * the window (only when `resumable`: the caller can take the reader back), storing the latest
 * event time before it in *last (µs since the start), and decides whether this pass keeps
 * checkpoints. A missing or unusable index is noted, not an error; with `distrusted` (why an
 * earlier try of this pass could not use it) the file is not read but noted as that, and
 * replaced. Errors are running out of memory. */
int mt_index_begin(mt_analysis *a, mt_reader *r, const mt_analysis_options *options, bool resumable,
                   const char *distrusted, int64_t *last, mt_error *err);
/* A pass resumed from a checkpoint failed with `failure`: notes that the index is not used. */
void mt_index_distrust(mt_analysis *a, const mt_error *failure);
/* The code trie node of an allocation's backtrace (only while keep_checkpoints); UINT32_MAX when
 * memory runs out. Call before mt_stacks_intern, which moves the domain's previous backtrace. */
uint32_t mt_index_track(mt_analysis *a, domain_state *d, const mt_event *ev);
/* Takes a checkpoint if one is due and the reader stands between packets. `last` is the latest
 * event time so far (µs since the start). */
int mt_index_step(mt_analysis *a, mt_reader *r, int64_t last, mt_error *err);
/* Writes the index if `write` and the pass added checkpoints or learnt `trace_end` (the time of the
 * trace's last event when the pass read it all, else INT64_MIN), and frees it (safe without one).
 * A write failure is noted in index_use.problem. */
void mt_index_end(mt_analysis *a, bool write, int64_t trace_end);

/* pass.c, for index.c: the state of a domain (made if new; NULL when memory runs out), and a new
 * live object. */
domain_state *mt_domain_of(mt_analysis *a, uint16_t domain);
bool mt_live_insert(mt_analysis *a, int64_t id, const live_obj *o);

/* The words a block was sampled over: an OCaml block carries its header word, which the runtime
 * samples too (FORMAT.md §3.1); external blocks are sampled over their length only (§3.2). A
 * crafted length of INT64_MAX stays that. */
static inline int64_t mt_sampled_words(int64_t words, mt_source source) {
  return words + (source != MT_SOURCE_EXTERNAL && words < INT64_MAX);
}

/* estimate.c */
double mt_estimate_objects(const mt_analysis *a, int64_t words, mt_source source);
/* At the end of a pass: every stack's object estimates made whole numbers that add up to the
 * summary's totals, each rounded once (the one rounding rule). False when memory runs out. */
bool mt_estimates_round(mt_analysis *a);
int mt_size_class_of(int64_t bytes);
/* The size class of `words` words of `word_bytes` bytes, without overflow. */
int mt_size_class_of_words(int64_t words, int64_t word_bytes);
int mt_lifetime_class_of(int64_t us);
void mt_amount_add(mt_amount *to, uint64_t objects, uint64_t samples, double objects_est);
void mt_amount_sub(mt_amount *to, uint64_t objects, uint64_t samples, double objects_est);

#endif
