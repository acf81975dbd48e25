/* libFuzzer target for the checkpoint index (TRACE.idx, src/analysis/index.c) and, through it, the
 * reader's saved state (src/format/reader_state.c): the input is an index file for a fixed trace
 * made at start-up (three domains, recursive backtraces). Its last 8 bytes are replaced by the
 * right checksum unless the second byte has its top bit set, so that mutations reach the parser
 * behind the checksum. A windowed analysis then runs with it; nothing may crash, hang or leak,
 * whatever the index holds. The trace is well-formed, so the analysis must succeed whatever the
 * index holds (one that proves wrong once resumed from is dropped and the pass starts over), and a
 * pass that did not resume must give the figures of a pass without an index. MEMTAP_FUZZ_INDEX_SEED
 * =PATH writes a valid index of the trace to PATH (the seed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bytes.h"
#include "memtap/analysis.h"

static uint8_t *trace;
static size_t trace_size;
static int64_t window_start;
static char index_path[64];

static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static char name[32];
  static mt_location loc;
  snprintf(name, sizeof name, "f%llu", (unsigned long long)code);
  loc = (mt_location){.filename = "a.c", .defname = name, .line = (int32_t)code};
  *entries = &loc;
  *count = 1;
  return MT_OK;
}

static void make_trace(void) {
  int fd = memfd_create("trace", 0);
  mt_trace_info info = {.start_time = 1700000000000000,
                        .sample_rate = 0.1,
                        .word_size = 64,
                        .executable_name = "fuzz",
                        .host_name = "h",
                        .ocaml_runtime_params = "",
                        .pid = 1,
                        .context = ""};
  mt_writer *w;
  if (fd < 0 || mt_writer_create(&w, fd, &info, NULL, NULL))
    abort();
  uint64_t rng = 1, stack[16];
  int64_t now = info.start_time, live[64] = {0};
  for (int i = 0; i < 500; i++) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    uint16_t domain = (uint16_t)((rng >> 61) % 3);
    now += (int64_t)(rng >> 58);
    size_t depth = 1 + (rng >> 30) % 16;
    for (size_t j = 0; j < depth; j++)
      stack[j] = j > 2 && j < 12 ? 7 : 1 + ((rng >> 8) + j) % 300;
    int64_t id;
    if (mt_writer_put_alloc_in(w, domain, now, 1 + (int64_t)(rng >> 50), 1, MT_SOURCE_MAJOR, stack,
                               depth, resolve, NULL, &id, NULL))
      abort();
    int slot = (int)(rng >> 40) % 64;
    if (live[slot])
      mt_writer_put_collect_in(w, domain, now, live[slot], NULL);
    live[slot] = id;
  }
  mt_writer_close(w, NULL);
  trace_size = (size_t)lseek(fd, 0, SEEK_END);
  trace = malloc(trace_size);
  if (!trace || pread(fd, trace, trace_size, 0) != (ssize_t)trace_size)
    abort();
  close(fd);
  window_start = (now - info.start_time) / 2;
}

static mt_summary reference; /* the window without an index */

static bool same_amount(const mt_amount *x, const mt_amount *y) {
  return x->objects == y->objects && x->samples == y->samples;
}

static bool same_figures(const mt_summary *x, const mt_summary *y) {
  return x->end_time == y->end_time && x->to == y->to && x->collects == y->collects &&
         x->promotes == y->promotes && x->unknown_collects == y->unknown_collects &&
         same_amount(&x->allocated, &y->allocated) && same_amount(&x->freed, &y->freed) &&
         same_amount(&x->live_start, &y->live_start) && same_amount(&x->live_end, &y->live_end);
}

static void analyse(bool with_index) {
  mt_reader *r;
  mt_reader_options ro = {.backtraces = true};
  if (mt_reader_open_memory(&r, trace, trace_size, &ro, NULL))
    abort();
  mt_analysis_options o = mt_analysis_default_options();
  o.from = window_start;
  o.index_path = with_index ? index_path : NULL;
  o.index_interval = 512;
  mt_analysis *a;
  mt_error err;
  int rc = mt_analysis_run(&a, r, &o, &err);
  if (rc != MT_OK && rc != MT_E_NOMEM) {
    fprintf(stderr, "the index made the analysis fail: %s\n", err.message);
    abort();
  }
  if (rc == MT_OK && !with_index)
    reference = *mt_analysis_summary(a);
  if (rc == MT_OK && !mt_analysis_index_use(a)->resumed &&
      !same_figures(mt_analysis_summary(a), &reference)) {
    fprintf(stderr, "a pass that did not resume differs from one without the index (%s)\n",
            mt_analysis_index_use(a)->problem);
    abort();
  }
  if (rc == MT_OK)
    mt_analysis_free(a);
  mt_reader_close(r);
}

static void init(void) {
  make_trace();
  snprintf(index_path, sizeof index_path, "/tmp/memtap-fuzz-index-%ld.idx", (long)getpid());
  analyse(false);
  const char *seed = getenv("MEMTAP_FUZZ_INDEX_SEED");
  if (seed) {
    unlink(index_path);
    analyse(true); /* no index yet: the pass reads the trace from its start, taking checkpoints */
    if (rename(index_path, seed))
      perror(seed);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!trace)
    init();
  FILE *f = fopen(index_path, "wb");
  if (!f)
    return 0;
  if (size >= 8 && !(data[1] & 0x80)) {
    fwrite(data, 1, size - 8, f);
    uint64_t sum = mt_bytes_checksum(data, size - 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
      le[i] = (uint8_t)(sum >> (8 * i));
    fwrite(le, 1, 8, f);
  } else {
    fwrite(data, 1, size, f);
  }
  fclose(f);
  analyse(true);
  unlink(index_path);
  return 0;
}
