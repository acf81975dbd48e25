/* The backtraces through chosen functions, and those functions' callers and callees (views.h).
 * Functions are chosen by a regex on their names; each backtrace is walked once, outermost frame
 * first, noting for each chosen function its outermost and innermost call. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/frame_keys.h"
#include "analysis/model.h"
#include "analysis/views.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/hashmap.h"
#include "common/regex_bound.h"

#define NONE UINT32_MAX

static int compile(regex_t *re, const char *regex, mt_error *err) {
  if (mt_regex_expansion(regex) > MT_REGEX_EXPANSION_MAX)
    return mt_fail(err, MT_E_INVALID, -1,
                   "bad regular expression '%s': its repetitions expand to more than %u atoms",
                   regex, MT_REGEX_EXPANSION_MAX);
  int rc = regcomp(re, regex, REG_EXTENDED | REG_NOSUB);
  if (rc) {
    char why[128];
    regerror(rc, re, why, sizeof why);
    return mt_fail(err, MT_E_INVALID, -1, "bad regular expression '%s': %s", regex, why);
  }
  return MT_OK;
}

/* Per key of `k`, whether its function matches; NULL with *rc set on failure. */
static bool *match_keys(const mt_frame_keys *k, const char *regex, int *rc, mt_error *err) {
  regex_t re;
  if ((*rc = compile(&re, regex, err)))
    return NULL;
  bool *match = calloc(k->nkeys ? k->nkeys : 1, sizeof *match);
  if (!match)
    *rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  for (size_t i = 0; match && i < k->nkeys; i++)
    match[i] = !regexec(&re, k->keys[i].function, 0, NULL, 0);
  regfree(&re);
  return match;
}

int mt_stacks_through(const mt_analysis *a, const char *regex, bool **keep, size_t *matched,
                      mt_error *err) {
  *keep = NULL;
  if (matched)
    *matched = 0;
  mt_frame_keys k;
  if (!mt_frame_keys_build(&k, a, MT_GROUP_FUNCTION))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  int rc;
  bool *match = match_keys(&k, regex, &rc, err);
  size_t n = mt_analysis_stack_count(a), count = 0;
  bool *out = match ? calloc(n ? n : 1, sizeof *out) : NULL;
  if (match && !out)
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  for (size_t s = 0; out && s < n; s++) {
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, s, &depth, NULL);
    if (!frames) {
      free(out);
      out = NULL;
      rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
      break;
    }
    for (size_t i = 0; i < depth && !out[s]; i++)
      out[s] = match[mt_frame_keys_of(&k, frames[i])];
    count += out[s];
  }
  free(match);
  mt_frame_keys_free(&k);
  if (!out)
    return rc;
  *keep = out;
  if (matched)
    *matched = count;
  return MT_OK;
}

/* The edges found so far: (peek, caller or callee, other key) -> index in `edges`. */
typedef struct edge_acc {
  mt_hashmap index;
  struct edge {
    uint32_t peek, other; /* other: a key id, NONE for no caller */
    bool callee;
    mt_peek_edge e;
  } * edges;
  size_t count, cap;
} edge_acc;

static bool edge_add(edge_acc *acc, uint32_t peek, bool callee, uint32_t other, const mt_stats *s) {
  int64_t key = (int64_t)(((uint64_t)peek << 33) | ((uint64_t)callee << 32) | other);
  uint64_t i;
  if (!mt_hashmap_get(&acc->index, key, &i)) {
    if (!MT_GROW(acc->edges, acc->cap, acc->count + 1) ||
        !mt_hashmap_put(&acc->index, key, acc->count))
      return false;
    i = acc->count++;
    acc->edges[i] = (struct edge){.peek = peek, .other = other, .callee = callee};
  }
  mt_stats_add(&acc->edges[i].e.stats, s);
  acc->edges[i].e.stacks++;
  return true;
}

typedef struct rank_ctx {
  const mt_analysis *a;
  mt_metric metric;
} rank_ctx;
static rank_ctx rank; /* qsort has no user pointer */

static int compare_edges(const void *p, const void *q) {
  const mt_peek_edge *x = p, *y = q;
  double vx = mt_analysis_metric(rank.a, &x->stats, rank.metric);
  double vy = mt_analysis_metric(rank.a, &y->stats, rank.metric);
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return mt_frame_key_compare(&x->key, &y->key);
}

static int compare_peeks(const void *p, const void *q) {
  const mt_peek *x = p, *y = q;
  double vx = mt_analysis_metric(rank.a, &x->cum, rank.metric);
  double vy = mt_analysis_metric(rank.a, &y->cum, rank.metric);
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return mt_frame_key_compare(&x->key, &y->key);
}

void mt_peeks_free(mt_peek *peeks, size_t count) {
  for (size_t i = 0; peeks && i < count; i++) {
    free(peeks[i].callers);
    free(peeks[i].callees);
  }
  free(peeks);
}

/* Moves the edges into their peeks' caller and callee arrays, leaving out zero values. */
static bool distribute(const mt_analysis *a, mt_metric metric, const mt_frame_keys *k,
                       const edge_acc *acc, mt_peek *peeks, const uint32_t *peek_of_key) {
  for (size_t i = 0; i < acc->count; i++) {
    const struct edge *e = &acc->edges[i];
    if (mt_analysis_metric(a, &e->e.stats, metric) <= 0)
      continue;
    mt_peek *p = &peeks[peek_of_key[e->peek]];
    mt_peek_edge **list = e->callee ? &p->callees : &p->callers;
    size_t *n = e->callee ? &p->ncallees : &p->ncallers;
    mt_peek_edge *grown = realloc(*list, (*n + 1) * sizeof **list);
    if (!grown)
      return false;
    *list = grown;
    grown[*n] = e->e;
    grown[*n].key = e->other == NONE ? (mt_frame){"", "", 0} : k->keys[e->other];
    ++*n;
  }
  return true;
}

int mt_peek_functions(const mt_analysis *a, const char *regex, mt_metric metric, mt_peek **peeks,
                      size_t *count, mt_error *err) {
  *peeks = NULL;
  *count = 0;
  int rc = mt_metric_check(a, metric, err);
  if (rc)
    return rc;
  mt_frame_keys k;
  if (!mt_frame_keys_build(&k, a, MT_GROUP_FUNCTION))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  bool *match = match_keys(&k, regex, &rc, err);
  if (!match) {
    mt_frame_keys_free(&k);
    return rc;
  }
  /* Per key: its peek (all keys get one while counting), the stack it was last seen in, plus 1,
   * and there its outermost and innermost positions. */
  size_t nk = k.nkeys;
  mt_peek *all = calloc(nk, sizeof *all);
  size_t *seen = calloc(nk, sizeof *seen);
  uint32_t *first = malloc(nk * sizeof *first), *last = malloc(nk * sizeof *last);
  uint32_t *present = malloc(nk * sizeof *present), *peek_of_key = malloc(nk * sizeof *present);
  edge_acc acc = {0};
  bool ok = all && seen && first && last && present && peek_of_key;
  size_t nstacks = mt_analysis_stack_count(a);
  for (size_t s = 0; ok && s < nstacks; s++) {
    const mt_stats *st = mt_analysis_stack_stats(a, s);
    size_t depth, npresent = 0;
    const uint32_t *frames = mt_analysis_stack_frames(a, s, &depth, NULL);
    if (!(ok = frames != NULL))
      break;
    for (uint32_t i = 0; i < depth; i++) {
      uint32_t id = mt_frame_keys_of(&k, frames[i]);
      if (!match[id])
        continue;
      if (seen[id] != s + 1) {
        seen[id] = s + 1;
        first[id] = i;
        present[npresent++] = id;
      }
      last[id] = i;
    }
    for (size_t j = 0; ok && j < npresent; j++) {
      uint32_t id = present[j];
      mt_peek *p = &all[id];
      mt_stats_add(&p->cum, st);
      p->cum_stacks++;
      uint32_t caller = first[id] ? mt_frame_keys_of(&k, frames[first[id] - 1]) : NONE;
      ok = edge_add(&acc, id, false, caller, st);
      if (last[id] + 1 == depth) {
        mt_stats_add(&p->flat, st);
        p->flat_stacks++;
      } else if (ok) {
        ok = edge_add(&acc, id, true, mt_frame_keys_of(&k, frames[last[id] + 1]), st);
      }
    }
  }
  size_t kept = 0;
  for (size_t i = 0; ok && i < nk; i++) {
    if (!match[i] || mt_analysis_metric(a, &all[i].cum, metric) <= 0)
      continue;
    peek_of_key[i] = (uint32_t)kept;
    all[kept] = all[i];
    all[kept++].key = k.keys[i];
  }
  if (ok)
    ok = distribute(a, metric, &k, &acc, all, peek_of_key);
  if (ok) {
    rank = (rank_ctx){a, metric};
    for (size_t i = 0; i < kept; i++) {
      if (all[i].ncallers) /* qsort's array may not be NULL, even empty */
        qsort(all[i].callers, all[i].ncallers, sizeof *all[i].callers, compare_edges);
      if (all[i].ncallees)
        qsort(all[i].callees, all[i].ncallees, sizeof *all[i].callees, compare_edges);
    }
    qsort(all, kept, sizeof *all, compare_peeks);
  }
  free(match);
  free(seen);
  free(first);
  free(last);
  free(present);
  free(peek_of_key);
  free(acc.edges);
  mt_hashmap_free(&acc.index);
  mt_frame_keys_free(&k);
  if (!ok) {
    mt_peeks_free(all, kept);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  if (!kept) {
    mt_peeks_free(all, 0);
    all = NULL;
  }
  *peeks = all;
  *count = kept;
  return MT_OK;
}
