/* Backtraces in the analysis (model.h). Each backtrace the reader returns is shown as a path in
 * the frame trie: its codes expanded into frames (function, file, line), hidden frames dropped and
 * direct recursion folded, one node per distinct shown prefix, so memory follows distinct
 * backtraces. Backtraces come as runs of equal codes (mt_event.backtrace_runs); an event costs only
 * the runs past those it shares with the domain's previous backtrace, whose trie nodes are
 * remembered per run. A path's end is a stack, whose site is its
 * innermost located frame (analysis.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/regex_bound.h"

int mt_stacks_init(mt_analysis *a, const mt_analysis_options *options, mt_error *err) {
  a->fold = !options->no_fold;
  if (options->hide && *options->hide) {
    if (mt_regex_expansion(options->hide) > MT_REGEX_EXPANSION_MAX)
      return mt_fail(err, MT_E_INVALID, -1,
                     "bad --hide regular expression '%s': its repetitions expand to more than %u "
                     "atoms",
                     options->hide, MT_REGEX_EXPANSION_MAX);
    int rc = regcomp(&a->hide, options->hide, REG_EXTENDED | REG_NOSUB);
    if (rc) {
      char why[128];
      regerror(rc, &a->hide, why, sizeof why);
      return mt_fail(err, MT_E_INVALID, -1, "bad --hide regular expression '%s': %s", options->hide,
                     why);
    }
    a->has_hide = true;
  }
  if (!MT_GROW(a->fnodes, a->fnodes_cap, 1))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  a->fnodes[0] = (frame_node){.parent = UINT32_MAX, .frame = UINT32_MAX, .stack = UINT32_MAX};
  for (size_t i = 0; i < MT_RUN_STEPS; i++)
    a->run_steps[i].to = UINT32_MAX; /* empty */
  a->nfnodes = 1;
  a->fnodes_budget = SIZE_MAX; /* the pass sets it from the trace's size */
  return MT_OK;
}

void mt_stacks_free(mt_analysis *a) {
  if (a->has_hide)
    regfree(&a->hide);
  free(a->frames);
  mt_hashmap_free(&a->frame_index);
  mt_hashmap_free(&a->string_index);
  mt_hashmap_free(&a->code_frames);
  free(a->frame_list);
  free(a->fnodes);
  mt_pairmap_free(&a->fnode_children);
  mt_pairmap_free(&a->code_steps);
  free(a->stacks);
  free(a->scratch);
  free(a->shown);
  free(a->shown_inlined);
}

static const char *copy_string(mt_analysis *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mt_arena_alloc(&a->arena, n);
  if (p)
    memcpy(p, s, n);
  return p;
}

static uint64_t hash_bytes(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
  return h * UINT64_C(0x100000001b3);
}

/* One copy of each distinct string (function and file names), so that equal names are equal
 * pointers. */
static const char *intern_string(mt_analysis *a, const char *str) {
  uint64_t h = hash_bytes(UINT64_C(0x84222325cbf29ce4), str);
  uint64_t p;
  for (;; h++) {
    if (!mt_hashmap_get(&a->string_index, (int64_t)h, &p))
      break;
    if (!strcmp((const char *)(uintptr_t)p, str))
      return (const char *)(uintptr_t)p;
  }
  const char *copy = copy_string(a, str);
  if (!copy || !mt_hashmap_put(&a->string_index, (int64_t)h, (uint64_t)(uintptr_t)copy))
    return NULL;
  return copy;
}

/* The index of frame (function, file, line), interned by content. */
static uint32_t intern_frame(mt_analysis *a, const char *function, const char *file, int32_t line) {
  uint64_t h = hash_bytes(hash_bytes(UINT64_C(0xcbf29ce484222325), function), file) ^
               (uint64_t)(uint32_t)line * UINT64_C(0x9E3779B97F4A7C15);
  uint64_t index;
  for (;; h++) {
    if (!mt_hashmap_get(&a->frame_index, (int64_t)h, &index))
      break;
    const mt_frame *f = &a->frames[index];
    if (f->line == line && !strcmp(f->function, function) && !strcmp(f->file, file))
      return (uint32_t)index;
  }
  if (!MT_GROW(a->frames, a->frames_cap, a->nframes + 1))
    return UINT32_MAX;
  mt_frame f = {intern_string(a, function), intern_string(a, file), line};
  if (!f.function || !f.file || !mt_hashmap_put(&a->frame_index, (int64_t)h, a->nframes))
    return UINT32_MAX;
  a->frames[a->nframes] = f;
  return (uint32_t)a->nframes++;
}

/* The shown frames of one code (hidden ones dropped), as a range of frame_list. */
static bool frames_of_code(mt_analysis *a, int64_t code, size_t *offset, size_t *count) {
  uint64_t packed;
  if (mt_hashmap_get(&a->code_frames, code, &packed)) {
    *offset = (size_t)(packed >> 9);
    *count = (size_t)(packed & 0x1FF);
    return true;
  }
  const mt_location *entries = NULL;
  size_t n = 0;
  if (a->reader && !mt_reader_lookup_location(a->reader, code, &entries, &n)) {
    /* A code no location event described: the trace is malformed there (FORMAT.md §6), as check
     * and dump say; on_alloc reports it at the event. */
    a->undescribed = true;
    a->undescribed_code = code;
    return false;
  }
  if (!MT_GROW(a->frame_list, a->frame_list_cap, a->nframe_list + (n ? n : 1)))
    return false;
  size_t start = a->nframe_list;
  char name[32];
  for (size_t i = 0; i < (n ? n : 1); i++) {
    const char *function = name, *file = "";
    int32_t line = 0;
    if (n) {
      function = entries[i].defname;
      file = entries[i].filename;
      line = entries[i].line;
    } else {
      snprintf(name, sizeof name, "$%" PRId64, code);
    }
    if (a->has_hide && regexec(&a->hide, function, 0, NULL, 0) == 0)
      continue;
    uint32_t f = intern_frame(a, function, file, line);
    if (f == UINT32_MAX)
      return false;
    a->frame_list[a->nframe_list++] = f;
  }
  *offset = start;
  *count = a->nframe_list - start;
  return mt_hashmap_put(&a->code_frames, code, (uint64_t)start << 9 | *count);
}

static uint32_t fnode_child(mt_analysis *a, uint32_t parent, uint32_t frame, bool inlined) {
  if (a->fnodes[parent].depth >= MT_ANALYSIS_SHOWN_DEPTH_MAX)
    return parent; /* deeper frames are dropped: the outermost ones are kept */
  uint64_t item = frame | (uint64_t)inlined << 32;
  uint32_t child = mt_pairmap_get(&a->fnode_children, parent, item);
  if (child != UINT32_MAX)
    return child;
  if (a->nfnodes >= a->fnodes_budget) {
    a->over_budget = true;
    return UINT32_MAX;
  }
  if (a->nfnodes >= UINT32_MAX - 1 || !MT_GROW(a->fnodes, a->fnodes_cap, a->nfnodes + 1))
    return UINT32_MAX;
  child = (uint32_t)a->nfnodes;
  if (!mt_pairmap_put(&a->fnode_children, parent, item, child))
    return UINT32_MAX;
  a->fnodes[a->nfnodes++] = (frame_node){.parent = parent,
                                         .frame = frame,
                                         .depth = a->fnodes[parent].depth + 1,
                                         .inlined = inlined,
                                         .stack = UINT32_MAX};
  return child;
}

static bool same_function(const mt_analysis *a, uint32_t f1, uint32_t f2) {
  return a->frames[f1].function == a->frames[f2].function; /* interned */
}

/* The frame trie node of `fnode` followed by the frames of `code`, remembered per (node, code):
 * one lookup for a step taken before. */
uint32_t mt_stacks_extend(mt_analysis *a, uint32_t from, int64_t code) {
  uint32_t fnode = mt_pairmap_get(&a->code_steps, from, (uint64_t)code);
  if (fnode != UINT32_MAX)
    return fnode;
  fnode = from;
  size_t offset, count;
  if (!frames_of_code(a, code, &offset, &count))
    return UINT32_MAX;
  for (size_t j = 0; j < count; j++) {
    uint32_t frame = a->frame_list[offset + j];
    bool inlined = j > 0;
    /* Folding: a run of frames of one function is shown as its innermost frame. */
    if (a->fold && fnode != 0 && same_function(a, a->fnodes[fnode].frame, frame)) {
      inlined = a->fnodes[fnode].inlined;
      fnode = a->fnodes[fnode].parent;
    }
    fnode = fnode_child(a, fnode, frame, inlined && fnode != 0);
    if (fnode == UINT32_MAX)
      return UINT32_MAX;
  }
  return mt_pairmap_put(&a->code_steps, from, (uint64_t)code, fnode) ? fnode : UINT32_MAX;
}

/* The frame trie node of `fnode` followed by `count` times the frames of `code`. Deep recursion
 * repeats one code hundreds of times; once a step with it folds onto its own node, the rest of the
 * run lands there too, without a lookup. */
static uint32_t extend_run(mt_analysis *a, uint32_t fnode, int64_t code, uint32_t count) {
  /* The same steps recur from event to event: a memo of (node, code) -> the node one step further
   * and whether a second step stays there (a recursion folded onto itself), which settles a run of
   * any length. A collision only costs the lookups. */
  uint64_t h = ((uint64_t)code * UINT64_C(0x9E3779B97F4A7C15)) ^
               ((uint64_t)fnode * UINT64_C(0xC2B2AE3D27D4EB4F));
  struct run_step *memo = &a->run_steps[(h ^ h >> 29) & (MT_RUN_STEPS - 1)];
  uint32_t next;
  if (memo->code == code && memo->from == fnode && memo->to != UINT32_MAX) {
    next = memo->to;
  } else {
    if ((next = mt_stacks_extend(a, fnode, code)) == UINT32_MAX)
      return next;
    *memo = (struct run_step){.code = code, .from = fnode, .to = next};
  }
  if (count == 1 || next == fnode || memo->fixed)
    return next;
  /* A second step, and more while they move. */
  uint32_t from = fnode;
  fnode = next;
  for (uint32_t j = 1; j < count; j++) {
    if ((next = mt_stacks_extend(a, fnode, code)) == UINT32_MAX)
      return next;
    if (next == fnode) {
      if (j == 1 && memo->code == code && memo->from == from)
        memo->fixed = true;
      break;
    }
    fnode = next;
  }
  return fnode;
}

static bool same_run(const mt_backtrace_run *x, const mt_backtrace_run *y) {
  return x->code == y->code && x->start == y->start && x->count == y->count;
}

uint32_t mt_stacks_intern(mt_analysis *a, domain_state *d, const mt_event *ev) {
  const mt_backtrace_run *runs = ev->backtrace_runs;
  size_t n = runs ? ev->backtrace_run_count : 0;
  /* The runs the reader says the event shares with the domain's previous backtrace keep their
   * nodes, so an event costs only its new runs, whatever its depth. */
  size_t k = ev->common_runs < d->nruns ? ev->common_runs : d->nruns;
  if (k > n)
    k = n;
  if (k > 0 && !same_run(&d->runs[k - 1].run, &runs[k - 1]))
    k = 0; /* not the stream we followed: start again from the root */
  if (!MT_GROW(d->runs, d->runs_cap, n + 1))
    return UINT32_MAX;
  uint32_t fnode = k ? d->runs[k - 1].fnode : 0;
  for (size_t i = k; i < n; i++) {
    fnode = extend_run(a, fnode, runs[i].code, runs[i].count);
    if (fnode == UINT32_MAX)
      return UINT32_MAX;
    d->runs[i] = (struct shown_run){.run = runs[i], .fnode = fnode};
  }
  d->nruns = n;
  /* (or exactly that deep) */
  a->summary.cut_backtraces += a->fnodes[fnode].depth >= MT_ANALYSIS_SHOWN_DEPTH_MAX;
  uint32_t stack = a->fnodes[fnode].stack;
  return stack != UINT32_MAX ? stack : mt_stacks_of_fnode(a, fnode);
}

uint32_t mt_stacks_of_fnode(mt_analysis *a, uint32_t fnode) {
  uint32_t stack = a->fnodes[fnode].stack;
  if (stack == UINT32_MAX) {
    if (a->nstacks >= UINT32_MAX - 1 || !MT_GROW(a->stacks, a->stacks_cap, a->nstacks + 1))
      return UINT32_MAX;
    uint32_t site = UINT32_MAX;
    for (uint32_t f = fnode; f != 0; f = a->fnodes[f].parent) {
      if (site == UINT32_MAX)
        site = a->fnodes[f].frame; /* the innermost, in case none has a location */
      if (a->frames[a->fnodes[f].frame].file[0]) {
        site = a->fnodes[f].frame;
        break;
      }
    }
    stack = (uint32_t)a->nstacks++;
    a->stacks[stack] = (stack_rec){.fnode = fnode, .site = site};
    a->fnodes[fnode].stack = stack;
  }
  return stack;
}

size_t mt_analysis_stack_count(const mt_analysis *a) {
  return a->nstacks;
}

const uint32_t *mt_analysis_stack_frames(const mt_analysis *a, size_t stack, size_t *depth,
                                         const bool **inlined) {
  mt_analysis *m = (mt_analysis *)a; /* the buffers are a cache, not part of the model */
  uint32_t fnode = a->stacks[stack].fnode;
  size_t n = a->fnodes[fnode].depth;
  *depth = n;
  if (!MT_GROW(m->shown, m->shown_cap, n + 1) ||
      !MT_GROW(m->shown_inlined, m->shown_inlined_cap, n + 1))
    return *depth = 0, NULL;
  for (uint32_t f = fnode; f != 0; f = a->fnodes[f].parent) {
    m->shown[--n] = a->fnodes[f].frame;
    m->shown_inlined[n] = a->fnodes[f].inlined;
  }
  if (inlined)
    *inlined = m->shown_inlined;
  return m->shown;
}

const mt_stats *mt_analysis_stack_stats(const mt_analysis *a, size_t stack) {
  return &a->stacks[stack].stats;
}

uint32_t mt_analysis_stack_site(const mt_analysis *a, size_t stack) {
  return a->stacks[stack].site;
}

mt_frame mt_analysis_frame(const mt_analysis *a, uint32_t frame) {
  if (frame == UINT32_MAX)
    return (mt_frame){"<no backtrace>", "", 0};
  return a->frames[frame];
}
