/* The report's tree of names (name_trie.h). Each node of the analysis' frame trie maps to a node
 * of names once, the first time a stack reaches it, so a stack costs only the frames no earlier
 * stack had (and a function's frame is the first one met in that order). A node's children are
 * found in a list while it has at most LIST_CHILDREN of them (most nodes have one or two), then in
 * an index map keyed by (parent, name): no hashing for the usual node, no long walks under a node
 * with many callees. */
#include "export/report/name_trie.h"

#include <stdlib.h>

#include "analysis/frame_trie.h"
#include "common/hashmap.h"
#include "common/indexmap.h"

#define LIST_CHILDREN 8
#define NONE UINT32_MAX

/* Frames stand for their function: each frame maps to the first frame seen with its function's
 * name. The analysis interns names, so equal names are equal pointers (were they not, the page
 * would still merge what is left). */
typedef struct name_frames {
  uint32_t *first;    /* frame -> the first frame of its function, NONE until seen */
  mt_hashmap by_name; /* name pointer -> frame */
} name_frames;

/* `frame`'s function's first frame, added to t->names when new. */
static uint32_t name_frame(name_frames *nf, mt_name_trie *t, const mt_analysis *a, uint32_t frame,
                           bool *ok) {
  if (nf->first[frame] == NONE) {
    int64_t key = (int64_t)(uintptr_t)mt_analysis_frame(a, frame).function;
    uint64_t v;
    if (!mt_hashmap_get(&nf->by_name, key, &v)) {
      v = frame;
      if (!mt_hashmap_put(&nf->by_name, key, v))
        *ok = false;
      t->names[t->nnames++] = frame;
    }
    nf->first[frame] = (uint32_t)v;
  }
  return nf->first[frame];
}

/* Children while they are built: per node (and the root, at index cap) its first child, the
 * number of its children up to LIST_CHILDREN + 1 (then they are in `many`), and per node its next
 * sibling. */
typedef struct children {
  uint32_t *first, *next;
  uint8_t *count;
  mt_indexmap many;
} children;

static uint64_t child_key(int64_t parent, uint32_t frame) {
  return (uint64_t)(parent + 1) << 32 | frame;
}

/* The child of `parent` (-1: the root) for `frame`, made if needed; -2 when memory runs out. The
 * arrays have room for one node per frame trie node, the most there can be. */
static int64_t child(mt_name_trie *t, children *c, size_t cap, int64_t parent, uint32_t frame) {
  size_t p = parent < 0 ? cap : (size_t)parent;
  if (c->count[p] > LIST_CHILDREN) {
    bool added;
    uint32_t id =
        mt_indexmap_get_or_add(&c->many, child_key(parent, frame), (uint32_t)t->n, &added);
    if (id == MT_INDEXMAP_NONE)
      return -2;
    if (!added)
      return id;
  } else {
    for (uint32_t k = c->first[p]; k != NONE; k = c->next[k])
      if (t->frame[k] == frame)
        return k;
  }
  if (t->n == cap)
    return -2;
  uint32_t id = (uint32_t)t->n++;
  t->parent[id] = (int32_t)parent;
  t->frame[id] = frame;
  t->weight[id] = 0;
  c->count[id] = 0;
  c->first[id] = NONE;
  if (c->count[p] <= LIST_CHILDREN) {
    c->next[id] = c->first[p];
    c->first[p] = id;
    if (++c->count[p] > LIST_CHILDREN) /* from now on in the map, the list's ones too */
      for (uint32_t k = c->first[p]; k != NONE; k = c->next[k]) {
        bool added;
        if (mt_indexmap_get_or_add(&c->many, child_key(parent, t->frame[k]), k, &added) ==
            MT_INDEXMAP_NONE)
          return -2;
      }
  }
  return id;
}

static double stack_weight(const mt_stats *s) {
  if (!s->allocated.objects && !s->live_start.objects)
    return -1;
  return (double)(s->allocated.samples + s->live_start.samples);
}

bool mt_name_trie_init(mt_name_trie *t, const mt_analysis *a) {
  size_t n = mt_analysis_stack_count(a), m = n ? n : 1, nf_nodes = mt_frame_trie_count(a);
  size_t cap = nf_nodes < INT32_MAX ? nf_nodes : INT32_MAX, c1 = cap + 1, f1 = nf_nodes + 1;
  name_frames nf = {0};
  children c = {.many = {.seed = mt_hashmap_random_seed()}}; /* keys come from the trace */
  *t = (mt_name_trie){0};
  t->leaf = malloc(m * sizeof *t->leaf);
  t->sw = malloc(m * sizeof *t->sw);
  t->site = malloc(m * sizeof *t->site);
  t->parent = malloc(c1 * sizeof *t->parent);
  t->frame = malloc(c1 * sizeof *t->frame);
  t->weight = malloc(c1 * sizeof *t->weight);
  c.first = malloc(c1 * sizeof *c.first);
  c.next = malloc(c1 * sizeof *c.next);
  c.count = malloc(c1);
  uint32_t *fparent = malloc(f1 * sizeof *fparent), *fframe = malloc(f1 * sizeof *fframe);
  int32_t *node_of = malloc(f1 * sizeof *node_of);  /* -2: not mapped yet */
  uint32_t *pending = malloc(f1 * sizeof *pending); /* on a stack's way down: the next node */
  uint32_t most = 0;                                /* frames are below this */
  bool ok = t->leaf && t->sw && t->site && t->parent && t->frame && t->weight && c.first &&
            c.next && c.count && fparent && fframe && node_of && pending;
  if (ok) {
    c.first[cap] = NONE;
    c.count[cap] = 0;
    most = mt_frame_trie_nodes(a, fparent, fframe);
    for (size_t i = 1; i < nf_nodes; i++)
      node_of[i] = -2;
    node_of[0] = -1;
  }
  nf.first = ok ? malloc((most ? most : 1) * sizeof *nf.first) : NULL;
  t->names = ok ? malloc((most ? most : 1) * sizeof *t->names) : NULL;
  ok = ok && nf.first && t->names;
  for (uint32_t f = 0; ok && f < most; f++)
    nf.first[f] = NONE;
  for (size_t i = 0; ok && i < n; i++) {
    t->sw[i] = stack_weight(mt_analysis_stack_stats(a, i));
    t->site[i] = mt_analysis_stack_site(a, i);
    if (t->site[i] != MT_NO_SITE && t->site[i] >= t->nframes)
      t->nframes = t->site[i] + 1;
    /* Up to the first node already mapped, then down mapping the ones met on the way. */
    uint32_t f = mt_frame_trie_of_stack(a, i), below = NONE;
    for (; node_of[f] == -2; f = fparent[f]) {
      pending[f] = below;
      below = f;
    }
    int64_t node = node_of[f];
    for (f = below; ok && f != NONE; f = pending[f]) {
      uint32_t name = name_frame(&nf, t, a, fframe[f], &ok);
      node = child(t, &c, cap, node, name);
      ok = ok && node >= 0;
      node_of[f] = (int32_t)node;
      if (name >= t->nframes)
        t->nframes = name + 1;
    }
    if (ok && node >= 0 && t->sw[i] > 0)
      t->weight[node] += t->sw[i];
    t->leaf[i] = node;
  }
  for (size_t i = ok ? t->n : 0; i-- > 0;) { /* children come after their parent */
    if (t->parent[i] >= 0)
      t->weight[t->parent[i]] += t->weight[i];
    t->weightless += !(t->weight[i] > 0); /* final: its children came before */
  }
  free(node_of);
  free(pending);
  free(fparent);
  free(fframe);
  free(nf.first);
  mt_hashmap_free(&nf.by_name);
  free(c.first);
  free(c.next);
  free(c.count);
  mt_indexmap_free(&c.many);
  return ok;
}

static const double *sort_weights; /* qsort has no user pointer */

static int by_node_weight(const void *p, const void *q) {
  size_t x = *(const size_t *)p, y = *(const size_t *)q;
  if (sort_weights[x] != sort_weights[y])
    return sort_weights[x] < sort_weights[y] ? 1 : -1;
  return (x > y) - (x < y);
}

bool mt_name_trie_order(mt_name_trie *t) {
  if (t->order)
    return true;
  t->order = malloc((t->n ? t->n : 1) * sizeof *t->order);
  if (!t->order)
    return false;
  for (size_t i = 0; i < t->n; i++)
    t->order[i] = i;
  sort_weights = t->weight;
  qsort(t->order, t->n, sizeof *t->order, by_node_weight);
  return true;
}

void mt_name_trie_free(mt_name_trie *t) {
  free(t->parent);
  free(t->frame);
  free(t->weight);
  free(t->leaf);
  free(t->sw);
  free(t->site);
  free(t->order);
  free(t->names);
  *t = (mt_name_trie){0};
}
