/* trace_facts: the integration tests' trace checker. Reads one memtrace trace through the reader
 * API (memtap/format.h) and prints, as one JSON object, what the tests compare: event counts and
 * sizes in total and per call site, and every violation of the invariants a trace of a real
 * program must keep (an id allocated twice, a collect of an object that is not live, time going
 * backwards). tests/integration/tracer/run_tracer_tests.py runs it on every trace it makes.
 *
 *   trace_facts [--source NAME]... [--depth D] [--marker-words W] [--skip-file SUFFIX] TRACE
 *
 * A "site" is the innermost source location of an allocation's backtrace (inlined frames
 * flattened) whose file name ends in one of the --source names, provided that only allocator
 * wrappers (operator new, __cxa_allocate_exception) lie inside it: the test program's own line. An
 * allocation that some other function makes for the program (printf's buffer) has no site. "top"
 * groups allocations by their innermost location without that filter, "stacks" (with --depth) by
 * their D innermost locations. A collect counts at the site of the object it collects. With
 * --marker-words, "after_marker" counts the allocations and collects of External (malloc) blocks
 * that follow the first allocation of W words (the independent recount's marker), the marker's
 * own excluded: mapped regions (Major) are not malloc's, glibc's log does not show them. Nor are
 * the blocks whose innermost location is in a file ending in SUFFIX (--skip-file, the dynamic
 * loader's rtld-malloc.h: how much ld.so allocates depends on how many objects are loaded, and
 * the tracer loads its own). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtap/format.h"

#define MAX_SOURCES 16
#define MAX_ERRORS 20
#define MAX_ID (INT64_C(1) << 32)
#define KEY_MAX 1024

typedef struct group {
  char *key;
  char *func;
  int64_t allocs, collects, words, nsamples;
} group;

typedef struct group_table {
  group *items;
  size_t count, capacity;
} group_table;

typedef struct object {
  int32_t site; /* index in sites, or -1: no frame in the sources */
  int32_t top;
  int8_t state;   /* 0 never seen, 1 live, 2 collected */
  int8_t source;  /* mt_source */
  int8_t skipped; /* not counted after the marker (--skip-file) */
} object;

typedef struct facts {
  const char *sources[MAX_SOURCES];
  size_t nsources;
  size_t depth;
  mt_reader *reader;
  group_table sites, tops, stacks;
  object *objects;
  int64_t nobjects;
  int64_t allocs, collects, promotes, words, nsamples, live, unknown_site_allocs;
  int64_t external_allocs, major_allocs, minor_allocs;
  int64_t last_time;
  char *errors[MAX_ERRORS];
  int64_t error_count;
  const mt_location *flat[4096];
  size_t nflat;
  int64_t marker_words; /* -1: no marker */
  int64_t marker_id;    /* -1 until seen */
  int64_t after_allocs, after_collects;
  const char *skip_file;
} facts;

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (q == NULL) {
    fprintf(stderr, "trace_facts: out of memory\n");
    exit(2);
  }
  return q;
}

static char *xstrdup(const char *s) {
  char *d = strdup(s);
  if (d == NULL) {
    fprintf(stderr, "trace_facts: out of memory\n");
    exit(2);
  }
  return d;
}

static void add_error(facts *f, const char *fmt, int64_t a, int64_t b) {
  if (f->error_count < MAX_ERRORS) {
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b);
    f->errors[f->error_count] = xstrdup(buf);
  }
  f->error_count++;
}

/* Linear lookup is enough: test programs have tens of sites, and the tables are small. A hash
 * would matter only for "top" on big programs (python3, git), which stays in the thousands. */
static int32_t group_find(group_table *t, const char *key, const char *func) {
  for (size_t i = t->count; i-- > 0;)
    if (strcmp(t->items[i].key, key) == 0)
      return (int32_t)i;
  if (t->count == t->capacity) {
    t->capacity = t->capacity ? 2 * t->capacity : 64;
    t->items = xrealloc(t->items, t->capacity * sizeof *t->items);
  }
  group *g = &t->items[t->count];
  memset(g, 0, sizeof *g);
  g->key = xstrdup(key);
  g->func = xstrdup(func ? func : "");
  return (int32_t)t->count++;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool in_sources(const facts *f, const char *filename) {
  const char *base = base_name(filename);
  for (size_t i = 0; i < f->nsources; i++)
    if (strcmp(base, f->sources[i]) == 0)
      return true;
  return false;
}

static bool is_allocator_wrapper(const char *defname) {
  static const char *const prefixes[] = {"operator new", "__cxa_allocate_exception"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(defname, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

/* Flattens the backtrace into f->flat, innermost location first. */
static void flatten(facts *f, const mt_event *e) {
  f->nflat = 0;
  for (size_t i = e->backtrace_length; i-- > 0;) {
    const mt_location *entries = NULL;
    size_t count = 0;
    if (!mt_reader_lookup_location(f->reader, e->backtrace[i], &entries, &count)) {
      add_error(f, "allocation %" PRId64 " uses undescribed code %" PRId64, e->obj_id,
                e->backtrace[i]);
      continue;
    }
    for (size_t j = count; j-- > 0;)
      if (f->nflat < sizeof f->flat / sizeof f->flat[0])
        f->flat[f->nflat++] = &entries[j];
  }
}

static void location_key(char *buf, size_t size, const mt_location *l) {
  snprintf(buf, size, "%s@%s:%" PRId32, l->defname, base_name(l->filename), l->line);
}

static void on_alloc(facts *f, const mt_event *e) {
  f->allocs++;
  f->external_allocs += e->source == MT_SOURCE_EXTERNAL;
  f->major_allocs += e->source == MT_SOURCE_MAJOR;
  f->minor_allocs += e->source == MT_SOURCE_MINOR;
  f->words += e->length;
  f->nsamples += e->nsamples;
  f->live++;
  if (e->obj_id < 0 || e->obj_id >= MAX_ID) {
    add_error(f, "object id %" PRId64 " out of range (%" PRId64 ")", e->obj_id, MAX_ID);
    return;
  }
  if (e->obj_id >= f->nobjects) {
    int64_t n = f->nobjects ? f->nobjects : 1024;
    while (n <= e->obj_id)
      n *= 2;
    f->objects = xrealloc(f->objects, (size_t)n * sizeof *f->objects);
    memset(f->objects + f->nobjects, 0, (size_t)(n - f->nobjects) * sizeof *f->objects);
    f->nobjects = n;
  }
  object *o = &f->objects[e->obj_id];
  if (o->state != 0)
    add_error(f, "object id %" PRId64 " allocated twice (state %" PRId64 ")", e->obj_id, o->state);
  o->state = 1;
  o->source = (int8_t)e->source;

  flatten(f, e);
  o->skipped =
      f->skip_file != NULL && f->nflat > 0 && ends_with(f->flat[0]->filename, f->skip_file);
  if (e->source == MT_SOURCE_EXTERNAL && !o->skipped) {
    if (f->marker_id >= 0)
      f->after_allocs++;
    else if (e->length == f->marker_words)
      f->marker_id = e->obj_id;
  }
  char key[KEY_MAX];
  o->site = -1;
  for (size_t i = 0; i < f->nflat; i++) {
    if (in_sources(f, f->flat[i]->filename)) {
      snprintf(key, sizeof key, "%s:%" PRId32, base_name(f->flat[i]->filename), f->flat[i]->line);
      o->site = group_find(&f->sites, key, f->flat[i]->defname);
      break;
    }
    if (!is_allocator_wrapper(f->flat[i]->defname))
      break;
  }
  if (f->nflat > 0)
    location_key(key, sizeof key, f->flat[0]);
  else
    snprintf(key, sizeof key, "<no backtrace>");
  o->top = group_find(&f->tops, key, NULL);

  group *groups[2] = {o->site >= 0 ? &f->sites.items[o->site] : NULL, &f->tops.items[o->top]};
  if (o->site < 0)
    f->unknown_site_allocs++;
  for (int i = 0; i < 2; i++) {
    if (groups[i] == NULL)
      continue;
    groups[i]->allocs++;
    groups[i]->words += e->length;
    groups[i]->nsamples += e->nsamples;
  }
  if (f->depth > 0) {
    size_t used = 0;
    key[0] = '\0';
    for (size_t i = 0; i < f->nflat && i < f->depth; i++) {
      char one[KEY_MAX];
      location_key(one, sizeof one, f->flat[i]);
      int n = snprintf(key + used, sizeof key - used, "%s%s", i ? " < " : "", one);
      if (n < 0 || (size_t)n >= sizeof key - used)
        break;
      used += (size_t)n;
    }
    int32_t index = group_find(&f->stacks, key, NULL); /* may move the items */
    group *g = &f->stacks.items[index];
    g->allocs++;
    g->words += e->length;
  }
}

static void on_collect(facts *f, const mt_event *e) {
  f->collects++;
  if (e->obj_id < 0 || e->obj_id >= f->nobjects || f->objects[e->obj_id].state == 0) {
    add_error(f, "collect of object %" PRId64 " never allocated", e->obj_id, 0);
    return;
  }
  object *o = &f->objects[e->obj_id];
  if (f->marker_id >= 0 && e->obj_id != f->marker_id && o->source == MT_SOURCE_EXTERNAL &&
      !o->skipped)
    f->after_collects++;
  if (o->state == 2) {
    add_error(f, "object %" PRId64 " collected twice", e->obj_id, 0);
    return;
  }
  o->state = 2;
  f->live--;
  if (o->site >= 0)
    f->sites.items[o->site].collects++;
  f->tops.items[o->top].collects++;
}

static int on_event(void *user, const mt_event *e) {
  facts *f = user;
  if (e->time < f->last_time)
    add_error(f, "time goes back from %" PRId64 " to %" PRId64, f->last_time, e->time);
  f->last_time = e->time;
  switch (e->kind) {
  case MT_EVENT_ALLOC: on_alloc(f, e); break;
  case MT_EVENT_COLLECT: on_collect(f, e); break;
  case MT_EVENT_PROMOTE: f->promotes++; break;
  }
  return 0;
}

static void print_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      printf("\\%c", *p);
    else if (*p < 0x20 || *p >= 0x7f)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  putchar('"');
}

static void print_groups(const char *name, const group_table *t) {
  printf(",\n \"%s\": {", name);
  for (size_t i = 0; i < t->count; i++) {
    const group *g = &t->items[i];
    printf("%s\n  ", i ? "," : "");
    print_string(g->key);
    printf(": {\"allocs\": %" PRId64 ", \"collects\": %" PRId64 ", \"words\": %" PRId64
           ", \"nsamples\": %" PRId64 ", \"func\": ",
           g->allocs, g->collects, g->words, g->nsamples);
    print_string(g->func);
    printf("}");
  }
  printf("}");
}

static void free_groups(group_table *t) {
  for (size_t i = 0; i < t->count; i++) {
    free(t->items[i].key);
    free(t->items[i].func);
  }
  free(t->items);
}

/* Everything is freed: the ASan+UBSan run of the suite checks for leaks. */
static void free_facts(facts *f) {
  free_groups(&f->sites);
  free_groups(&f->tops);
  free_groups(&f->stacks);
  free(f->objects);
  for (int64_t i = 0; i < f->error_count && i < MAX_ERRORS; i++)
    free(f->errors[i]);
  mt_reader_close(f->reader);
}

static void warn(void *user, int64_t offset, const char *message) {
  (void)user;
  fprintf(stderr, "trace_facts: warning at byte %" PRId64 ": %s\n", offset, message);
}

int main(int argc, char **argv) {
  static facts f;
  f.marker_words = -1;
  f.marker_id = -1;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--source") == 0 && i + 1 < argc && f.nsources < MAX_SOURCES)
      f.sources[f.nsources++] = argv[++i];
    else if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
      f.depth = (size_t)strtoul(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--marker-words") == 0 && i + 1 < argc)
      f.marker_words = strtoll(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--skip-file") == 0 && i + 1 < argc)
      f.skip_file = argv[++i];
    else if (path == NULL && argv[i][0] != '-')
      path = argv[i];
    else {
      fprintf(stderr, "usage: trace_facts [--source NAME]... [--depth D] [--marker-words W] "
                      "[--skip-file SUFFIX] TRACE\n");
      return 64;
    }
  }
  if (path == NULL) {
    fprintf(stderr, "usage: trace_facts [--source NAME]... [--depth D] [--marker-words W] "
                    "[--skip-file SUFFIX] TRACE\n");
    return 64;
  }
  mt_reader_options options = {.backtraces = true, .on_warning = warn};
  mt_error err = {0};
  if (mt_reader_open(&f.reader, path, &options, &err) != MT_OK) {
    fprintf(stderr, "trace_facts: %s: %s\n", path, err.message);
    return 1;
  }
  int status = mt_reader_iter(f.reader, on_event, &f, &err);
  const mt_trace_info *info = mt_reader_info(f.reader);
  printf("{\"read_ok\": %s, \"read_error\": ", status == MT_OK ? "true" : "false");
  print_string(status == MT_OK ? "" : err.message);
  printf(",\n \"truncated\": %s, \"warnings\": %" PRIu64,
         mt_reader_truncated(f.reader, NULL) ? "true" : "false", mt_reader_warning_count(f.reader));
  printf(",\n \"version\": %d, \"sample_rate\": %.17g, \"pid\": %" PRId64, info->version,
         info->sample_rate, info->pid);
  printf(",\n \"executable\": ");
  print_string(info->executable_name);
  printf(", \"params\": ");
  print_string(info->ocaml_runtime_params);
  printf(", \"context\": ");
  print_string(info->context);
  printf(",\n \"allocs\": %" PRId64 ", \"collects\": %" PRId64 ", \"promotes\": %" PRId64
         ", \"words\": %" PRId64 ", \"nsamples\": %" PRId64 ", \"live\": %" PRId64
         ", \"allocs_outside_sources\": %" PRId64,
         f.allocs, f.collects, f.promotes, f.words, f.nsamples, f.live, f.unknown_site_allocs);
  printf(",\n \"external_allocs\": %" PRId64 ", \"major_allocs\": %" PRId64
         ", \"minor_allocs\": %" PRId64,
         f.external_allocs, f.major_allocs, f.minor_allocs);
  printf(",\n \"after_marker\": {\"seen\": %s, \"allocs\": %" PRId64 ", \"collects\": %" PRId64 "}",
         f.marker_id >= 0 ? "true" : "false", f.after_allocs, f.after_collects);
  printf(",\n \"error_count\": %" PRId64 ", \"errors\": [", f.error_count);
  for (int64_t i = 0; i < f.error_count && i < MAX_ERRORS; i++) {
    printf("%s", i ? ", " : "");
    print_string(f.errors[i]);
  }
  printf("]");
  print_groups("sites", &f.sites);
  print_groups("top", &f.tops);
  print_groups("stacks", &f.stacks);
  printf("}\n");
  free_facts(&f);
  return status == MT_OK ? 0 : 1;
}
