/* The self-contained HTML report: report/report.html with its CSS and script inlined (embedded at
 * build time by embed.cmake) and the data as JSON, one data set per trace (two with a baseline:
 * `memtap report A --diff B`). The data has a size cap whatever the trace (docs/analysis.md,
 * "Size cap"):
 *   - the backtraces form one trie of function names (report/name_trie.c); it is pruned by node
 * weight (samples allocated plus live at the window's start): the heaviest nodes are kept, as many
 * as fit a byte budget, and whatever hangs below a kept node but was cut goes to one child
 * "(smaller callees)" of that node, so no mass leaves its place in the tree;
 *   - each row keeps the site of its backtraces (the table of sites stays exact), up to a number
 *     of sites, the lightest merged into "(other sites)";
 *   - at most REPORT_ROWS rows: the analysis' cells re-aggregated by (trie node, site), and when
 *     that is still too many, with coarser time steps, size and lifetime classes, a smaller trie
 *     and fewer sites (levels[]) until they fit.
 * Merging never drops anything: every cell's amount is in exactly one row. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "common/indexmap.h"
#include "export/export_internal.h"
#include "export/report/name_trie.h"
#include "export/report/writer.h"

#define REPORT_ROWS MT_CELL_LIMIT
#define REPORT_NODES 1000000 /* trie nodes kept, at most (the byte budget binds first) */
#define REPORT_NAME 256
#define REPORT_TITLE 256
/* So the file is at most about 15.7 MB, stated as 16 MB: rows 100 000 x 79 bytes ("99999,255,
 * 255,9,9," two 20-digit counts, a 16-character estimate, ",\n"), the trie and its frames within
 * the level's byte budget (5 MB, each node and frame counted at its longest), sites' frames within
 * SITE_BYTES, report stacks (at most one per row) 100 000 x 16 ("-1,999999,\n"), the timeline
 * 2 x 1 024 numbers of at most 16 characters, the page, its script and the title under 100 KB.
 * With a baseline every budget is halved for each of the two traces. */
#define NODE_BYTES 5000000
#define SITE_BYTES 1000000

extern const char mt_report_html[], mt_report_css[], mt_report_js[];

/* How much detail the rows keep, tried in order until the rows fit. The last level always fits:
 * a trie of the root's "(smaller callees)" and "<no backtrace>" only, at most 1 000 sites plus
 * "(other sites)", and every row (allocated before the window or not, freed or not, one size
 * class, freed or not): 2 x 1 001 x 8 rows. */
typedef struct level {
  size_t node_bytes;  /* JSON bytes of trie nodes and their frames, at most */
  size_t sites;       /* sites kept by name, at most */
  unsigned time_step; /* time steps are 2^time_step of the analysis' */
  unsigned size_step; /* size classes merged by 2^size_step */
  unsigned life_step; /* lifetime classes of freed objects merged by 2^life_step */
} level;

static const level levels[] = {{NODE_BYTES, 20000, 0, 0, 0}, {NODE_BYTES, 20000, 1, 0, 0},
                               {NODE_BYTES, 20000, 2, 0, 0}, {3000000, 10000, 2, 1, 1},
                               {1000000, 5000, 2, 1, 1},     {250000, 2000, 4, 2, 2},
                               {50000, 1000, 6, 4, 4},       {0, 1000, 6, 4, 4}};

_Static_assert(2 * 1001 * 8 <= REPORT_ROWS / 2, "the last level must fit, halved too");

#define OTHER_SITES_FRAME (UINT32_MAX - 1) /* "(other sites)" */
#define PRUNED_FRAME (UINT32_MAX - 2)      /* "(smaller callees)" */
#define NO_SITE MT_NO_SITE

static size_t digits(size_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

/* One selection: the report's frames, nodes and stacks ---------------------------------------- */

typedef struct site_rank {
  double weight;
  uint32_t frame;
} site_rank;

static int by_site_weight(const void *p, const void *q) {
  const site_rank *x = p, *y = q;
  if (x->weight != y->weight)
    return x->weight < y->weight ? 1 : -1;
  return (x->frame > y->frame) - (x->frame < y->frame);
}

typedef struct report {
  const mt_analysis *a;
  mt_name_trie *t;
  size_t trie_bytes; /* the whole trie's nodes and frames, as select_level counts them */
  size_t node_cost;  /* JSON bytes of one node at most: "parent,frame," and a line's end */
  site_rank *sites;  /* distinct sites, heaviest first */
  size_t nsites;
  /* one selection: */
  int32_t *frame_ids;     /* analysis frame -> report frame, -1 if none */
  int16_t (*name_len)[2]; /* analysis frame -> its function's and file's plain length (-1: not
                             plain, -2: not known yet) */
  int32_t special[3];     /* the same for NO_SITE (unused), OTHER_SITES_FRAME, PRUNED_FRAME */
  uint32_t *frames;       /* report frame -> analysis frame (or *_FRAME) */
  size_t nframes, frames_cap;
  int64_t *rid;        /* trie node -> report node, -1 when cut */
  int64_t (*nodes)[2]; /* report node -> parent report node, report frame */
  size_t nnodes, nkept;
  int64_t *map;         /* analysis stack -> report stack, -1 when it has no cells */
  int64_t (*stacks)[2]; /* report stack -> report node (-1: empty backtrace), site frame (-1) */
  uint8_t *shared;      /* report stack -> whether more than one analysis stack maps to it */
  size_t nstacks;
  const level *l;
  size_t rows_cap;
  struct row *rows;
  size_t nrows;
  double pruned_weight, weight; /* of stacks cut short, of all */
  bool failed;
} report;

static void report_free(report *r) {
  free(r->frame_ids);
  free(r->name_len);
  free(r->sites);
  free(r->frames);
  free(r->rid);
  free(r->nodes);
  free(r->map);
  free(r->stacks);
  free(r->shared);
  free(r->rows);
}

/* The bytes put_name copies as they are: printable ASCII but quotes, backslashes and what it
 * escapes for HTML (<, >, &). */
/* clang-format off */
static const uint8_t plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
/* clang-format on */

/* Whether put_name copies `s` as it is. */
static bool plain_name(const char *s, size_t *len) {
  size_t n = 0;
  while (n <= REPORT_NAME && plain_byte[(uint8_t)s[n]])
    n++;
  *len = n;
  return !s[n] && n <= REPORT_NAME;
}

/* The length of frame `frame`'s function (`which` 0) or file (1) if plain_name copies it as it
 * is, else -1; found once per frame. */
static int name_length(const report *r, uint32_t frame, int which) {
  int16_t *len = &r->name_len[frame][which];
  if (*len == -2) {
    mt_frame f = mt_analysis_frame(r->a, frame);
    size_t n;
    *len = plain_name(which ? f.file : f.function, &n) ? (int16_t)n : -1;
  }
  return *len;
}

/* JSON bytes of a name at most: as it is when plain, else escaped and cut. */
static size_t name_cost(const char *s, int plain_length) {
  if (plain_length >= 0)
    return (size_t)plain_length + 2;
  size_t n = strlen(s) * 6 + 2;
  return n < REPORT_NAME + 2 ? n : REPORT_NAME + 2;
}

/* JSON bytes of a frame at most: '["function","file",-2147483648],\n'. */
static size_t frame_cost(const report *r, uint32_t frame) {
  if (frame >= PRUNED_FRAME)
    return 40;
  mt_frame f = mt_analysis_frame(r->a, frame);
  return name_cost(f.function, name_length(r, frame, 0)) +
         name_cost(f.file, name_length(r, frame, 1)) + 17;
}

static int32_t *frame_slot(report *r, uint32_t frame) {
  return frame >= PRUNED_FRAME ? &r->special[UINT32_MAX - frame] : &r->frame_ids[frame];
}

static bool has_frame(report *r, uint32_t frame) {
  return *frame_slot(r, frame) >= 0;
}

/* A frame new to the report: the next report frame. */
static int64_t report_frame_add(report *r, uint32_t frame, int32_t *slot) {
  if (r->nframes == r->frames_cap) {
    size_t cap = r->frames_cap ? r->frames_cap * 2 : 1024;
    uint32_t *p = realloc(r->frames, cap * sizeof *p);
    if (!p)
      return r->failed = true, 0;
    r->frames = p;
    r->frames_cap = cap;
  }
  r->frames[r->nframes] = frame;
  *slot = (int32_t)r->nframes;
  return (int64_t)r->nframes++;
}

static inline int64_t report_frame(report *r, uint32_t frame) {
  int32_t *slot = frame_slot(r, frame);
  return *slot >= 0 ? *slot : report_frame_add(r, frame, slot);
}

/* What keeping every node of the trie would cost (r->trie_bytes), and one node (r->node_cost). */
static bool trie_cost(report *r) {
  const mt_name_trie *t = r->t;
  r->name_len = malloc((t->nframes ? t->nframes : 1) * sizeof *r->name_len);
  if (!r->name_len)
    return false;
  for (uint32_t f = 0; f < t->nframes; f++)
    r->name_len[f][0] = r->name_len[f][1] = -2;
  r->node_cost = digits(t->n + 1) + digits(t->nframes + 3) + 3;
  r->trie_bytes = t->n * r->node_cost;
  for (size_t i = 0; i < t->nnames; i++)
    r->trie_bytes += frame_cost(r, t->names[i]);
  return true;
}

/* Site frames as array indexes: NO_SITE after the analysis frames. */
static size_t site_slot(const mt_name_trie *t, uint32_t site) {
  return site == NO_SITE ? t->nframes : site;
}

static bool sites_init(report *r) {
  const mt_name_trie *t = r->t;
  size_t n = mt_analysis_stack_count(r->a);
  uint32_t *index = malloc((t->nframes + 1) * sizeof *index); /* site slot -> r->sites */
  r->sites = malloc((n ? n : 1) * sizeof *r->sites);
  bool ok = r->sites && index;
  for (size_t f = 0; ok && f <= t->nframes; f++)
    index[f] = UINT32_MAX;
  for (size_t i = 0; ok && i < n; i++) {
    if (t->sw[i] < 0)
      continue;
    uint32_t *k = &index[site_slot(t, t->site[i])];
    if (*k == UINT32_MAX) {
      *k = (uint32_t)r->nsites++;
      r->sites[*k] = (site_rank){0, t->site[i]};
    }
    r->sites[*k].weight += t->sw[i];
  }
  free(index);
  if (ok)
    qsort(r->sites, r->nsites, sizeof *r->sites, by_site_weight);
  return ok;
}

/* The report's trie and stacks for level `l`, budgets divided by `share`. */
static bool select_level(report *r, const level *l, size_t share) {
  mt_name_trie *t = r->t;
  const mt_analysis *a = r->a;
  size_t n = mt_analysis_stack_count(a);
  if (!r->frame_ids)
    r->frame_ids = malloc((t->nframes ? t->nframes : 1) * sizeof *r->frame_ids);
  if (!r->frame_ids)
    return false;
  for (uint32_t f = 0; f < t->nframes; f++)
    r->frame_ids[f] = -1;
  r->special[0] = r->special[1] = r->special[2] = -1;
  r->nframes = r->nnodes = r->nkept = r->nstacks = 0;
  r->pruned_weight = r->weight = 0;
  r->l = l;
  free(r->rid);
  free(r->nodes);
  free(r->map);
  free(r->stacks);
  free(r->shared);
  r->rid = malloc((t->n ? t->n : 1) * sizeof *r->rid);
  r->map = malloc((n ? n : 1) * sizeof *r->map);
  r->stacks = malloc((n ? n : 1) * sizeof *r->stacks);
  r->shared = malloc(n ? n : 1);
  r->nodes = NULL;
  if (!r->rid || !r->map || !r->stacks || !r->shared)
    return false;
  /* Sites first: by weight, while their names fit. */
  size_t site_bytes = 0, nsites = 0;
  uint8_t *kept_sites = calloc(t->nframes + 1, 1); /* by site slot */
  if (!kept_sites)
    return false;
  for (size_t s = 0; s < r->nsites && nsites < l->sites / share; s++) {
    uint32_t f = r->sites[s].frame;
    if (f != NO_SITE) {
      size_t c = frame_cost(r, f);
      if (site_bytes + c > SITE_BYTES / share)
        break;
      site_bytes += c;
      report_frame(r, f);
    }
    nsites++;
    kept_sites[site_slot(t, f)] = 1;
  }
  /* Then the trie's heaviest nodes while they fit; parents come first in t->order. The whole trie
   * when it fits: every node with weight (its parent has more). */
  size_t bytes = 0, kept = 0;
  bool whole = r->trie_bytes <= l->node_bytes / share && t->n <= REPORT_NODES;
  if (!whole && !mt_name_trie_order(r->t)) {
    free(kept_sites);
    return false;
  }
  if (whole) {
    kept = t->n;
  } else {
    for (size_t i = 0; i < t->n; i++)
      r->rid[i] = -1;
    for (; kept < t->n && kept < REPORT_NODES; kept++) {
      size_t node = t->order[kept];
      size_t c = r->node_cost + (has_frame(r, t->frame[node]) ? 0 : frame_cost(r, t->frame[node]));
      if (bytes + c > l->node_bytes / share || t->weight[node] <= 0)
        break;
      bytes += c;
      report_frame(r, t->frame[node]);
      r->rid[node] = 0;
    }
  }
  /* Report nodes in trie order (parents first), then one "(smaller callees)" per cut node; when
   * every node is kept, report nodes are trie nodes and no stack is cut short. */
  bool all = whole && !t->weightless;
  r->nodes = all ? NULL : malloc((2 * kept + 1) * sizeof *r->nodes); /* all: the trie's */
  /* Per trie node its kept ancestor or itself, and per trie node + 1 its "(smaller callees)". */
  int64_t *deepest = all ? NULL : malloc((t->n ? t->n : 1) * sizeof *deepest);
  int64_t *pruned = all ? NULL : malloc((t->n + 1) * sizeof *pruned);
  if (!all && (!r->nodes || !deepest || !pruned)) {
    free(deepest);
    free(pruned);
    free(kept_sites);
    return false;
  }
  for (size_t i = 0; all && i < t->n; i++) /* the nodes' frames first, in their order */
    report_frame(r, t->frame[i]);
  if (all)
    r->nnodes = t->n;
  for (size_t i = 0; !all && i < t->n; i++) {
    int32_t parent = t->parent[i];
    if (whole ? t->weight[i] > 0 : r->rid[i] == 0) {
      r->rid[i] = (int64_t)r->nnodes;
      r->nodes[r->nnodes][0] = parent < 0 ? -1 : r->rid[parent];
      r->nodes[r->nnodes++][1] = report_frame(r, t->frame[i]);
      deepest[i] = (int64_t)i;
    } else {
      r->rid[i] = -1;
      deepest[i] = parent < 0 ? -1 : deepest[parent];
    }
    pruned[i + 1] = -1;
  }
  if (pruned)
    pruned[0] = -1;
  r->nkept = r->nnodes;
  int64_t pruned_frame = -1, other_sites = -1;
  mt_indexmap stack_ids = {.seed = mt_hashmap_random_seed()};
  if (!mt_indexmap_reserve(&stack_ids, n))
    r->failed = true;
  for (size_t i = 0; i < n && !r->failed; i++) {
    r->map[i] = -1;
    if (t->sw[i] < 0)
      continue;
    int64_t leaf = t->leaf[i], node = -1;
    r->weight += t->sw[i];
    if (leaf >= 0) {
      int64_t up = deepest ? deepest[leaf] : leaf;
      if (up == leaf) {
        node = all ? leaf : r->rid[leaf];
      } else {
        r->pruned_weight += t->sw[i];
        if (pruned[up + 1] < 0) {
          if (pruned_frame < 0)
            pruned_frame = report_frame(r, PRUNED_FRAME);
          pruned[up + 1] = (int64_t)r->nnodes;
          r->nodes[r->nnodes][0] = up < 0 ? -1 : r->rid[up];
          r->nodes[r->nnodes++][1] = pruned_frame;
        }
        node = pruned[up + 1];
      }
    }
    int64_t site = -1;
    if (t->site[i] != NO_SITE) {
      if (kept_sites[site_slot(t, t->site[i])]) {
        site = report_frame(r, t->site[i]);
      } else {
        if (other_sites < 0)
          other_sites = report_frame(r, OTHER_SITES_FRAME);
        site = other_sites;
      }
    }
    bool added;
    uint32_t id =
        mt_indexmap_get_or_add(&stack_ids, (uint64_t)(node + 1) << 32 | (uint64_t)(site + 1),
                               (uint32_t)r->nstacks, &added);
    if (id == MT_INDEXMAP_NONE) {
      r->failed = true;
      break;
    }
    if (added) {
      r->shared[r->nstacks] = 0;
      r->stacks[r->nstacks][0] = node;
      r->stacks[r->nstacks++][1] = site;
    } else {
      r->shared[id] = 1;
    }
    r->map[i] = (int64_t)id;
  }
  mt_indexmap_free(&stack_ids);
  free(kept_sites);
  free(deepest);
  free(pruned);
  return !r->failed;
}

/* Rows ---------------------------------------------------------------------------------------- */

typedef struct row {
  uint32_t stack;
  uint8_t alloc_bucket, free_bucket, size_class, lifetime_class;
  mt_amount amount;
} row;

static unsigned coarser_time(unsigned bucket, unsigned step) {
  return bucket == MT_CELL_NEVER ? bucket : bucket >> step; /* MT_CELL_BEFORE is 255 too */
}

static unsigned freed_lifetime_classes(unsigned step) {
  return ((MT_LIFETIME_CLASSES - 2) >> step) + 1;
}

/* The cells re-aggregated by report stack into r->rows (capacity `cap`). Returns false when there
 * are more than `cap` (or memory ran out: r->failed). */
static bool aggregate(report *r, size_t cap) {
  size_t nc;
  int64_t width;
  const mt_cell *cells = mt_analysis_cells(r->a, &nc, &width);
  const level *l = r->l;
  mt_indexmap index = {.seed = mt_hashmap_random_seed()};
  size_t n = 0;
  bool fits = mt_indexmap_reserve(&index, nc < cap ? nc : cap);
  if (!fits)
    r->failed = true;
  bool finest = !l->time_step && !l->size_step && !l->life_step;
  for (size_t i = 0; fits && i < nc; i++) {
    const mt_cell *c = &cells[i];
    int64_t stack = r->map[c->stack];
    if (stack < 0)
      continue;
    if (finest && !r->shared[stack]) { /* the cell's key is the row's: no other cell has it */
      if (n == cap) {
        fits = false;
        break;
      }
      r->rows[n++] = (row){(uint32_t)stack, c->alloc_bucket,   c->free_bucket,
                           c->size_class,   c->lifetime_class, c->amount};
      continue;
    }
    unsigned ab = coarser_time(c->alloc_bucket, l->time_step);
    unsigned fb = coarser_time(c->free_bucket, l->time_step);
    unsigned sc = (unsigned)c->size_class >> l->size_step;
    unsigned lc = c->lifetime_class == MT_LIFETIME_CLASSES - 1
                      ? freed_lifetime_classes(l->life_step)
                      : (unsigned)c->lifetime_class >> l->life_step;
    uint64_t key = (uint64_t)stack << 32 | (ab << 24 | fb << 16 | sc << 8 | lc);
    bool added = false;
    uint32_t at = n < cap ? mt_indexmap_get_or_add(&index, key, (uint32_t)n, &added)
                          : mt_indexmap_get(&index, key);
    if (at == MT_INDEXMAP_NONE) { /* a new row past the cap, or no memory */
      r->failed = n < cap;
      fits = false;
      break;
    }
    if (added)
      r->rows[n++] =
          (row){(uint32_t)stack, (uint8_t)ab, (uint8_t)fb, (uint8_t)sc, (uint8_t)lc, {0}};
    mt_amount *to = &r->rows[at].amount;
    to->objects += c->amount.objects;
    to->samples += c->amount.samples;
    to->objects_estimated += c->amount.objects_estimated;
  }
  mt_indexmap_free(&index);
  r->nrows = n;
  return fits;
}

/* Output -------------------------------------------------------------------------------------- */

/* A JSON string as mt_json_string_cut(out, s, REPORT_NAME) writes it; printable ASCII without
 * quotes, backslashes or what it escapes for HTML (<, >, &), the usual function and file name, is
 * copied as it is. */
static void put_name(report_writer *w, const char *s, int plain_length) {
  if (plain_length < 0) {
    rw_flush(w);
    mt_json_string_cut(w->out, s, REPORT_NAME);
    return;
  }
  size_t n = (size_t)plain_length;
  char *p = rw_room(w, n + 2);
  *p++ = '"';
  memcpy(p, s, n);
  p[n] = '"';
  rw_end(w, p + n + 1);
}

/* A non-negative estimate as "%.3f" would write it (below 10^12), else "%.6e". */
static void put_estimate(report_writer *w, double v) {
  if (!(v >= 0 && v < 1e12)) {
    rw_flush(w);
    fprintf(w->out, "%.6e", v);
    return;
  }
  rw_end(w, rw_fixed3(w, rw_room(w, 17), v));
}

/* Pairs of numbers, flat, 16 pairs a line; with `relative`, the first of pair i as i minus it. */
static void put_pairs(report_writer *w, const int64_t (*v)[2], size_t n, bool relative) {
  for (size_t i = 0; i < n; i += 16) {
    size_t end = n - i < 16 ? n : i + 16;
    char *p = rw_room(w, 2 + 16 * (2 * 21 + 2));
    if (i) {
      *p++ = ',';
      *p++ = '\n';
    }
    int64_t base = relative ? (int64_t)i : 0, step = relative; /* the first is base - v[j][0] */
    for (size_t j = i; j < end; j++, base += step) {
      p = rw_int(w, p, relative ? base - v[j][0] : v[j][0]);
      *p++ = ',';
      p = rw_int(w, p, v[j][1]);
      *p++ = ',';
    }
    rw_end(w, p - 1); /* no comma after the line's last pair */
  }
}

/* The nodes when the whole trie is kept (r->nodes not made), as put_pairs writes them: per trie
 * node its distance to its parent (its index + 1 for a root child) and its report frame. */
static void put_trie_nodes(report_writer *w, const report *r) {
  const mt_name_trie *t = r->t;
  for (size_t i = 0; i < t->n; i += 16) {
    size_t end = t->n - i < 16 ? t->n : i + 16;
    char *p = rw_room(w, 2 + 16 * (2 * 21 + 2));
    if (i) {
      *p++ = ',';
      *p++ = '\n';
    }
    for (size_t j = i; j < end; j++) {
      p = rw_int(w, p, (int64_t)j - t->parent[j]);
      *p++ = ',';
      p = rw_int(w, p, r->frame_ids[t->frame[j]]);
      *p++ = ',';
    }
    rw_end(w, p - 1); /* no comma after the line's last pair */
  }
}

/* The timeline's estimated bytes: "%.0f" below 10^15, else "%.6e". */
static void put_bytes(report_writer *w, double v) {
  if (!(v >= 0 && v < 1e15) || signbit(v)) {
    rw_flush(w);
    fprintf(w->out, fabs(v) < 1e15 ? "%.0f" : "%.6e", v);
    return;
  }
  rw_end(w, rw_uint(w, rw_room(w, 20), (uint64_t)llrint(v)));
}

/* A non-negative estimate in at most 16 characters. */
static void json_estimate(FILE *out, double v) {
  fprintf(out, fabs(v) < 1e12 ? "%.3f" : "%.6e", v);
}

static void json_amount(FILE *out, const mt_amount *m) {
  fprintf(out,
          "{\"objects\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"objects_estimated\":", m->objects,
          m->samples);
  json_estimate(out, m->objects_estimated);
  fputc('}', out);
}

static void write_summary(FILE *out, const mt_analysis *a) {
  const mt_summary *s = mt_analysis_summary(a);
  fputs("{\"executable\":", out);
  mt_json_string_cut(out, s->info.executable_name, REPORT_NAME);
  fprintf(out,
          ",\"sample_rate\":%.17g,\"bytes_per_sample\":%.17g,\"duration_us\":%" PRId64
          ",\"from_us\":%" PRId64 ",\"to_us\":%" PRId64 ",\"peak_time_us\":%" PRId64
          ",\"backtraces\":%" PRIu64 ",\"sites\":%" PRIu64 ",\"allocated\":",
          s->info.sample_rate, s->bytes_per_sample,
          mt_analysis_elapsed(s->end_time, s->info.start_time), s->from, s->to, s->peak_time,
          s->distinct_backtraces, s->sites);
  json_amount(out, &s->allocated);
  fputs(",\"freed\":", out);
  json_amount(out, &s->freed);
  fputs(",\"peak\":", out);
  json_amount(out, &s->at_peak);
  fputs(",\"live_start\":", out);
  json_amount(out, &s->live_start);
  fputs(",\"live_end\":", out);
  json_amount(out, &s->live_end);
  fputc('}', out);
}

static void write_limits(FILE *out, const level *l) {
  /* The classes as merged by the level: the upper bound of each, null when unbounded. */
  fputs(",\"size_limits\":[", out);
  unsigned nsize = ((MT_SIZE_CLASSES - 1) >> l->size_step) + 1;
  for (unsigned g = 0; g < nsize; g++) {
    unsigned last = ((g + 1) << l->size_step) - 1;
    if (last >= MT_SIZE_CLASSES - 1)
      fprintf(out, "%snull", g ? "," : "");
    else
      fprintf(out, "%s%" PRId64, g ? "," : "", mt_size_class_limit((int)last));
  }
  fputs("],\"lifetime_limits\":[", out);
  unsigned nfreed = freed_lifetime_classes(l->life_step);
  for (unsigned g = 0; g < nfreed; g++) {
    unsigned last = ((g + 1) << l->life_step) - 1;
    if (last >= MT_LIFETIME_CLASSES - 2)
      fprintf(out, "%snull", g ? "," : "");
    else
      fprintf(out, "%s%" PRId64, g ? "," : "", mt_lifetime_class_limit((int)last));
  }
  fputs(",null]", out); /* not freed */
}

static bool write_data(FILE *out, const report *r) {
  const mt_analysis *a = r->a;
  fputs("{\"summary\":", out);
  write_summary(out, a);
  write_limits(out, r->l);
  size_t nb;
  int64_t width;
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &nb, &width);
  report_writer *w = malloc(sizeof *w);
  if (!w)
    return false;
  rw_init(w, out);
  fprintf(out, ",\"timeline\":{\"width\":%" PRId64 ",\"live_max\":[", width);
  for (size_t i = 0; i < nb; i++) {
    if (i)
      rw_char(w, ',');
    put_bytes(w, tl[i].live_max);
  }
  rw_flush(w);
  fputs("],\"live_end\":[", out);
  for (size_t i = 0; i < nb; i++) {
    if (i)
      rw_char(w, ',');
    put_bytes(w, tl[i].live_end);
  }
  rw_flush(w);
  fputs("]},\"frames\":[", out);
  int64_t pruned = -1, other_sites = -1;
  for (size_t i = 0; i < r->nframes; i++) {
    uint32_t id = r->frames[i];
    mt_frame f = id == OTHER_SITES_FRAME ? (mt_frame){"(other sites)", "", 0}
                 : id == PRUNED_FRAME    ? (mt_frame){"(smaller callees)", "", 0}
                                         : mt_analysis_frame(a, id);
    if (id == PRUNED_FRAME)
      pruned = (int64_t)i;
    if (id == OTHER_SITES_FRAME)
      other_sites = (int64_t)i;
    char *p = rw_room(w, 3);
    if (i) {
      *p++ = ',';
      *p++ = '\n';
    }
    *p++ = '[';
    rw_end(w, p);
    bool ours = id < PRUNED_FRAME; /* else one of ours, plain */
    put_name(w, f.function, ours ? name_length(r, id, 0) : (int)strlen(f.function));
    rw_char(w, ',');
    put_name(w, f.file, ours ? name_length(r, id, 1) : (int)strlen(f.file));
    p = rw_room(w, 23);
    *p++ = ',';
    p = rw_int(w, p, f.line);
    *p++ = ']';
    rw_end(w, p);
  }
  rw_flush(w);
  fprintf(out, "],\"pruned_frame\":%" PRId64 ",\"other_sites_frame\":%" PRId64, pruned,
          other_sites);
  fprintf(out, ",\"trie\":{\"nodes\":%zu,\"kept\":%zu,\"pruned_share\":%.6f},\"nodes\":[", r->t->n,
          r->nkept, r->weight > 0 ? r->pruned_weight / r->weight : 0.0);
  /* Flat: per node its distance to its parent (its index + 1 for a root child) and its frame. */
  if (r->nodes)
    put_pairs(w, r->nodes, r->nnodes, true);
  else
    put_trie_nodes(w, r);
  rw_flush(w);
  fputs("],\"stacks\":[", out); /* flat: node (-1: empty backtrace), site frame (-1: none) */
  put_pairs(w, r->stacks, r->nstacks, false);
  rw_flush(w);
  mt_analysis_cells(a, &nb, &width);
  /* Flat, 8 numbers a row: stack, allocation step, free step, size class, lifetime class, sampled
   * objects, samples, estimated objects. */
  fprintf(out, "],\"cells\":{\"width\":%" PRId64 ",\"buckets\":%d,\"rows\":[",
          width << r->l->time_step, MT_CELL_TIME_BUCKETS >> r->l->time_step);
  for (size_t i = 0; i < r->nrows; i++) {
    const row *c = &r->rows[i];
    char *p = rw_room(w, 1 + 7 * 21); /* a line's end, 7 numbers and their commas */
    if (i)
      *p++ = '\n';
    p = rw_uint(w, p, c->stack);
    *p++ = ',';
    p = rw_uint(w, p, c->alloc_bucket);
    *p++ = ',';
    p = rw_uint(w, p, c->free_bucket);
    *p++ = ',';
    p = rw_uint(w, p, c->size_class);
    *p++ = ',';
    p = rw_uint(w, p, c->lifetime_class);
    *p++ = ',';
    p = rw_uint(w, p, c->amount.objects);
    *p++ = ',';
    p = rw_uint(w, p, c->amount.samples);
    *p++ = ',';
    double e = c->amount.objects_estimated;
    if (e >= 0 && e < 1e12) {
      p = rw_fixed3(w, rw_room_after(w, p, 18), e);
      if (i + 1 < r->nrows)
        *p++ = ',';
      rw_end(w, p);
      continue;
    }
    rw_end(w, p);
    put_estimate(w, e);
    if (i + 1 < r->nrows)
      rw_char(w, ',');
  }
  rw_flush(w);
  free(w);
  fputs("]}}", out);
  return true;
}

/* The title, cut to REPORT_TITLE bytes at a character boundary. */
static void write_title(FILE *out, const char *title) {
  char cut[REPORT_TITLE + 1];
  size_t n = strlen(title);
  if (n > REPORT_TITLE) {
    n = REPORT_TITLE;
    while (n > 0 && ((unsigned char)title[n] & 0xC0) == 0x80)
      n--;
  }
  memcpy(cut, title, n);
  cut[n] = 0;
  mt_xml_text(out, cut);
}

/* Prepares one trace's data, its budgets divided by `share`. */
static int prepare(report *r, mt_name_trie *t, const mt_analysis *a, size_t share, mt_error *err) {
  size_t nc;
  int64_t width;
  if (!mt_analysis_cells(a, &nc, &width) && nc == 0 &&
      mt_analysis_summary(a)->allocated.objects + mt_analysis_summary(a)->live_start.objects > 0)
    return mt_fail(err, MT_E_INVALID, -1, "the report needs an analysis run with cells");
  *r = (report){.a = a, .t = t, .rows_cap = REPORT_ROWS / share};
  r->rows = malloc(r->rows_cap * sizeof *r->rows);
  bool ok = r->rows && trie_cost(r) && sites_init(r);
  size_t li = 0;
  for (; ok && li < sizeof levels / sizeof levels[0]; li++) {
    ok = select_level(r, &levels[li], share);
    if (ok && aggregate(r, r->rows_cap))
      break;
    ok = ok && !r->failed;
  }
  if (!ok || li == sizeof levels / sizeof levels[0])
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  return MT_OK;
}

int mt_export_html(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  const mt_analysis *sides[2] = {o->baseline, a};
  size_t first = o->baseline ? 0 : 1, share = o->baseline ? 2 : 1;
  mt_name_trie tries[2] = {{0}, {0}};
  report reports[2] = {{0}, {0}};
  int rc = MT_OK;
  for (size_t k = first; rc == MT_OK && k < 2; k++) {
    if (!mt_name_trie_init(&tries[k], sides[k]))
      rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    else
      rc = prepare(&reports[k], &tries[k], sides[k], share, err);
  }
  const char *title = o->title ? o->title : mt_analysis_summary(a)->info.executable_name;
  for (const char *t = mt_report_html; rc == MT_OK && *t;) {
    const char *at = strchr(t, '@');
    if (!at) {
      fputs(t, out);
      break;
    }
    fwrite(t, 1, (size_t)(at - t), out);
    if (!strncmp(at, "@TITLE@", 7)) {
      write_title(out, title);
      t = at + 7;
    } else if (!strncmp(at, "@CSS@", 5)) {
      fputs(mt_report_css, out);
      t = at + 5;
    } else if (!strncmp(at, "@JS@", 4)) {
      fputs(mt_report_js, out);
      t = at + 4;
    } else if (!strncmp(at, "@DATA@", 6)) {
      fputs("{\"traces\":[", out);
      for (size_t k = first; k < 2; k++) {
        if (k > first)
          fputs(",\n", out);
        if (!write_data(out, &reports[k]))
          rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
      }
      fputs("]}", out);
      t = at + 6;
    } else {
      fputc('@', out);
      t = at + 1;
    }
  }
  for (size_t k = 0; k < 2; k++) {
    report_free(&reports[k]);
    mt_name_trie_free(&tries[k]);
  }
  return rc;
}
