/* Turning samples into estimates (FORMAT.md §3), the one rounding rule for object counts, the size
 * and lifetime classes, and what the sources of a trace mean. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"

static double estimate(double rate, double w) {
  if (rate >= 1)
    return 1;
  double p = -expm1(w * log1p(-rate)); /* 1 - (1 - rate)^w, accurate for tiny rates */
  return p > 0 ? 1 / p : 1;
}

double mt_estimate_objects(const mt_analysis *a, int64_t words, mt_source source) {
  int64_t w = mt_sampled_words(words, source);
  if (w < 1)
    w = 1;
  if (w >= MT_ESTIMATE_CACHE)
    return estimate(a->rate, (double)w);
  mt_analysis *m = (mt_analysis *)a; /* a cache, not part of the model */
  if (m->estimates[w] == 0)
    m->estimates[w] = estimate(a->rate, (double)w);
  return m->estimates[w];
}

double mt_analysis_bytes(const mt_analysis *a, uint64_t samples) {
  return (double)samples * a->summary.bytes_per_sample;
}

static const int64_t size_limits[MT_SIZE_CLASSES] = {16,    64,    256,    1024,    4096,
                                                     16384, 65536, 262144, 1048576, INT64_MAX};
static const int64_t lifetime_limits[MT_LIFETIME_CLASSES] = {
    10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, INT64_MAX, INT64_MAX};

int64_t mt_size_class_limit(int i) {
  return i >= 0 && i < MT_SIZE_CLASSES ? size_limits[i] : INT64_MAX;
}

int64_t mt_lifetime_class_limit(int i) {
  return i >= 0 && i < MT_LIFETIME_CLASSES ? lifetime_limits[i] : INT64_MAX;
}

int mt_size_class_of(int64_t bytes) {
  int i = 0;
  while (i < MT_SIZE_CLASSES - 1 && bytes > size_limits[i])
    i++;
  return i;
}

int mt_size_class_of_words(int64_t words, int64_t word_bytes) {
  int64_t bytes;
  if (words < 0 || __builtin_mul_overflow(words, word_bytes, &bytes))
    bytes = words < 0 ? 0 : INT64_MAX; /* a crafted length: the largest class */
  return mt_size_class_of(bytes);
}

int mt_lifetime_class_of(int64_t us) {
  int i = 0;
  while (i < MT_LIFETIME_CLASSES - 2 && us > lifetime_limits[i])
    i++;
  return i;
}

void mt_amount_add(mt_amount *to, uint64_t objects, uint64_t samples, double objects_est) {
  to->objects += objects;
  to->samples += samples;
  to->objects_estimated += objects_est;
}

void mt_amount_sub(mt_amount *to, uint64_t objects, uint64_t samples, double objects_est) {
  to->objects -= objects;
  to->samples -= samples;
  to->objects_estimated -= objects_est;
  if (to->objects == 0)
    to->objects_estimated = 0; /* no rounding residue on an empty set */
}

typedef struct stack_remainder {
  double fraction;
  uint32_t stack;
} stack_remainder;

static int by_fraction(const void *p, const void *q) {
  const stack_remainder *x = p, *y = q;
  if (x->fraction != y->fraction)
    return x->fraction < y->fraction ? 1 : -1;
  return (x->stack > y->stack) - (x->stack < y->stack);
}

/* One amount of every stack (at `field` bytes into mt_stats) made whole: each stack gets the floor
 * or the ceiling of its estimate, the largest remainders the ceilings, so that they add up to the
 * summary's total rounded once (the summary keeps the exact estimate). */
static void round_amounts(mt_analysis *a, size_t field, const mt_amount *total,
                          stack_remainder *r) {
  /* Sums in double: a damaged trace's estimates can pass 2^63 (whole numbers stay exact up to
   * 2^53, far beyond any real trace's counts). */
  double want = round(total->objects_estimated > 0 ? total->objects_estimated : 0), sum = 0;
  size_t n = a->nstacks;
  for (size_t i = 0; i < n; i++) {
    mt_amount *m = (mt_amount *)((char *)&a->stacks[i].stats + field);
    double v = m->objects_estimated > 0 ? m->objects_estimated : 0;
    m->objects_estimated = floor(v);
    sum += m->objects_estimated;
    r[i] = (stack_remainder){v - m->objects_estimated, (uint32_t)i};
  }
  qsort(r, n, sizeof *r, by_fraction);
  for (size_t k = 0; k < n && sum < want; k++, sum++)
    ((mt_amount *)((char *)&a->stacks[r[k].stack].stats + field))->objects_estimated += 1;
}

/* Orders cells by stack, then the cells of objects allocated before the window apart from the
 * others, then the largest remainder first (the earlier cell on a tie). */
typedef struct cell_remainder {
  uint32_t stack;
  bool before;
  double fraction;
  size_t cell;
} cell_remainder;

static int by_stack_then_fraction(const void *p, const void *q) {
  const cell_remainder *x = p, *y = q;
  if (x->stack != y->stack)
    return x->stack < y->stack ? -1 : 1;
  if (x->before != y->before)
    return x->before ? 1 : -1;
  if (x->fraction != y->fraction)
    return x->fraction < y->fraction ? 1 : -1;
  return (x->cell > y->cell) - (x->cell < y->cell);
}

/* The cells' estimates made whole, after round_amounts: the cells of a stack's objects allocated
 * in the window add up to its allocated estimate, those of objects allocated before it to its
 * live-at-start estimate, the largest remainders taking the ceilings. The report sums cells, so
 * it shows every site and stack with the count top, flame and pprof print. */
static bool round_cells(mt_analysis *a) {
  size_t n = a->ncells;
  if (n == 0)
    return true;
  cell_remainder *r = malloc(n * sizeof *r);
  if (!r)
    return false;
  for (size_t i = 0; i < n; i++) {
    mt_amount *m = &a->cells[i].amount;
    double v = m->objects_estimated > 0 ? m->objects_estimated : 0;
    m->objects_estimated = floor(v);
    r[i] = (cell_remainder){a->cells[i].stack, a->cells[i].alloc_bucket == MT_CELL_BEFORE,
                            v - m->objects_estimated, i};
  }
  qsort(r, n, sizeof *r, by_stack_then_fraction);
  for (size_t g = 0, end; g < n; g = end) {
    double sum = 0;
    for (end = g; end < n && r[end].stack == r[g].stack && r[end].before == r[g].before; end++)
      sum += a->cells[r[end].cell].amount.objects_estimated;
    const mt_stats *st = &a->stacks[r[g].stack].stats;
    double want = r[g].before ? st->live_start.objects_estimated : st->allocated.objects_estimated;
    /* Up from the largest remainders; down (only when the additions' rounding made the floors
     * overshoot) from the smallest cells still positive. */
    for (size_t k = g; k < end && sum < want; k++, sum++)
      a->cells[r[k].cell].amount.objects_estimated += 1;
    for (size_t k = end; k-- > g && sum > want;)
      if (a->cells[r[k].cell].amount.objects_estimated >= 1)
        a->cells[r[k].cell].amount.objects_estimated -= 1, sum--;
  }
  free(r);
  return true;
}

bool mt_estimates_round(mt_analysis *a) {
  /* top (a site: the sum of its stacks), flame and pprof (each stack), the summary and the report
   * (its cells) all show these integers, so the same site reads the same count everywhere. */
  stack_remainder *r = malloc((a->nstacks ? a->nstacks : 1) * sizeof *r);
  if (!r)
    return false;
  mt_summary *s = &a->summary;
  round_amounts(a, offsetof(mt_stats, allocated), &s->allocated, r);
  round_amounts(a, offsetof(mt_stats, freed), &s->freed, r);
  round_amounts(a, offsetof(mt_stats, live_start), &s->live_start, r);
  round_amounts(a, offsetof(mt_stats, live), &s->live_end, r);
  round_amounts(a, offsetof(mt_stats, peak), &s->at_peak, r);
  round_amounts(a, offsetof(mt_stats, temporary), &s->temporary, r);
  free(r);
  return round_cells(a);
}

const char *mt_analysis_source_name(const mt_analysis *a, mt_source source) {
  static const char *ocaml[] = {"minor", "major", "external"};
  static const char *memtap[] = {"minor", "mapped", "malloc"};
  static const char *go[] = {"goroutine stacks", "spans", "heap objects"}; /* memtap/import.h */
  if ((unsigned)source > 2)
    return "?";
  if (!strncmp(a->summary.info.ocaml_runtime_params, "memtap-go", 9))
    return go[source];
  return (a->memtap_trace ? memtap : ocaml)[source];
}
