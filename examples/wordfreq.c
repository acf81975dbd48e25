/* Example program for `memtap record` (the README's demo): counts the words of a generated text in
 * a hash table, keeps the most frequent ones in a growing array, and has a bug on purpose: the
 * spelling of every word it rejects as too short is kept in a list nobody frees. It has the
 * patterns a heap profiler is for: churn (a buffer per line), growth by realloc (the table and the
 * top array), many small blocks (one per distinct word) and a leak at a known line
 * (remember_rejected).
 *
 *   wordfreq [LINES]      (default 100000 lines; prints the five most frequent words) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char *word;
  unsigned count;
  struct entry *next;
} entry;

typedef struct table {
  entry **slots;
  size_t size, used;
} table;

typedef struct rejected {
  char *word;
  struct rejected *next;
} rejected;

static rejected *rejected_words;

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fputs("wordfreq: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603u;
  while (*s)
    h = (h ^ (unsigned char)*s++) * 1099511628211u;
  return h;
}

static void grow(table *t) {
  size_t size = t->size ? t->size * 2 : 64;
  entry **slots = calloc(size, sizeof *slots);
  if (!slots)
    exit(1);
  for (size_t i = 0; i < t->size; i++)
    for (entry *e = t->slots[i], *next; e; e = next) {
      next = e->next;
      size_t j = hash(e->word) & (size - 1);
      e->next = slots[j];
      slots[j] = e;
    }
  free(t->slots);
  t->slots = slots;
  t->size = size;
}

static void count_word(table *t, const char *word) {
  if (t->used * 4 >= t->size * 3)
    grow(t);
  size_t i = hash(word) & (t->size - 1);
  for (entry *e = t->slots[i]; e; e = e->next)
    if (strcmp(e->word, word) == 0) {
      e->count++;
      return;
    }
  entry *e = xmalloc(sizeof *e);
  e->word = strdup(word);
  e->count = 1;
  e->next = t->slots[i];
  t->slots[i] = e;
  t->used++;
}

/* The leak: every rejected word is copied into a list that is never freed. */
static void remember_rejected(const char *word) {
  rejected *r = xmalloc(sizeof *r);
  r->word = strdup(word);
  r->next = rejected_words;
  rejected_words = r;
}

/* A line of pseudo-random words from a small vocabulary (deterministic). */
static char *make_line(uint64_t *state) {
  static const char *const vocabulary[] = {"the",        "heap",  "grows", "when",   "nobody",
                                           "frees",      "a",     "block", "memory", "profiler",
                                           "shows",      "where", "it",    "goes",   "of",
                                           "allocation", "site",  "leak",  "trace",  "sample"};
  size_t cap = 16, len = 0;
  char *line = xmalloc(cap);
  unsigned words = 4 + (unsigned)(*state % 12);
  for (unsigned w = 0; w < words; w++) {
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    const char *word = vocabulary[(*state >> 33) % 20];
    size_t n = strlen(word);
    while (len + n + 2 > cap) {
      cap *= 2;
      char *bigger = realloc(line, cap);
      if (!bigger)
        exit(1);
      line = bigger;
    }
    memcpy(line + len, word, n);
    len += n;
    line[len++] = ' ';
  }
  line[len] = 0;
  return line;
}

static int by_count(const void *a, const void *b) {
  const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
  if (x->count != y->count)
    return x->count < y->count ? 1 : -1;
  return strcmp(x->word, y->word);
}

int main(int argc, char **argv) {
  long lines = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  table t = {0};
  uint64_t state = 42;
  for (long i = 0; i < lines; i++) {
    char *line = make_line(&state);
    for (char *save, *word = strtok_r(line, " ", &save); word; word = strtok_r(NULL, " ", &save)) {
      if (strlen(word) < 2)
        remember_rejected(word);
      else
        count_word(&t, word);
    }
    free(line);
  }
  entry **all = xmalloc(t.used * sizeof *all);
  size_t n = 0;
  for (size_t i = 0; i < t.size; i++)
    for (entry *e = t.slots[i]; e; e = e->next)
      all[n++] = e;
  qsort(all, n, sizeof *all, by_count);
  for (size_t i = 0; i < n && i < 5; i++)
    printf("%-12s %u\n", all[i]->word, all[i]->count);
  for (size_t i = 0; i < n; i++) {
    free(all[i]->word);
    free(all[i]);
  }
  free(all);
  free(t.slots);
  return 0;
}
