/* libFuzzer target for the causal repair alone (src/record/order.c, unsettled.c): the input is a
 * history of allocations, frees and reallocs of 8 addresses by 4 threads, with stamps that move
 * back and forth across the skew tolerance, and expiries that advance the frontier and the rings'
 * epoch in between (which fuzz_record, reading a whole ring file in one poll, never reaches). Each
 * 4 bytes are one step: byte 0 the operation (bits 0-2: 0-2 allocate, 3-5 free, 6 realloc, 7
 * expire) and the thread (bits 3-4); byte 1 the address (bits 0-2; a realloc's new one in bits
 * 3-5); bytes 2-3 the stamp's step, signed, in units of 16 ns. Whatever the history, the trace
 * must pass trace_check.h, and the counts must add up: every allocation written once, every free
 * either written or counted unknown. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtap/format.h"
#include "memtap/tracer.h"
#include "record/record_internal.h"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define START_NS 1000000000000000ll
#define SKEW_NS 2000
#define BOUND_NS 50000

static void no_writer_needed(void *user) {
  (void)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return 0;
  int fd = memfd_create("fuzz-order", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  mt_trace_info info = {.start_time = START_NS / 1000,
                        .sample_rate = 1,
                        .executable_name = "fuzz",
                        .host_name = "h",
                        .ocaml_runtime_params = "",
                        .context = ""};
  rec_output out = {0};
  rec_order order;
  rec_modules modules = {0};
  rec_sites sites = {0};
  mt_recorder_stats stats = {0};
  rec_symboliser *symboliser = rec_symboliser_new(true, false);
  if (!symboliser || rec_output_open(&out, fd, false, &info, 3) != MT_OK ||
      !rec_order_init(&order, SKEW_NS, BOUND_NS))
    abort();
  rec_sink sink = {.out = &out,
                   .modules = &modules,
                   .sites = &sites,
                   .symboliser = symboliser,
                   .stats = &stats,
                   .start_us = START_NS / 1000,
                   .ensure_writer = no_writer_needed};
  rec_event *e = rec_event_new(0);
  if (!e)
    abort();
  int64_t now = START_NS + 1000000, newest = now;
  uint64_t allocs = 0, frees = 0;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    unsigned op = data[i] & 7, thread = (data[i] >> 3) & 3;
    int16_t step;
    memcpy(&step, data + i + 2, sizeof step);
    now += (int64_t)step * 16;
    if (now < START_NS)
      now = START_NS;
    if (now > newest)
      newest = now;
    if (op == 7) {
      rec_order_expire(&order, &sink, newest + (int64_t)(data[i + 1] & 7) * BOUND_NS / 2, false);
      order.epoch += data[i + 1] >> 6;
      continue;
    }
    *e = (rec_event){.time_ns = now,
                     .order = i / 4,
                     .source = thread + 1,
                     .type = op < 3   ? MT_TRACER_REC_ALLOC
                             : op < 6 ? MT_TRACER_REC_FREE
                                      : MT_TRACER_REC_REALLOC,
                     .kind = MT_TRACER_KIND_MALLOC,
                     .addr = 0x10000 + (uint64_t)(data[i + 1] & 7) * 0x100,
                     .addr2 = 0x10000 + (uint64_t)((data[i + 1] >> 3) & 7) * 0x100,
                     .size = 16 + data[i + 1],
                     .nsamples = 1,
                     .frames = e->own_frames};
    allocs += op < 3 || op == 6;
    frees += op >= 3;
    rec_order_process(&order, &sink, e);
  }
  rec_order_expire(&order, &sink, INT64_MAX, true);
  rec_output_close(&out);
  if (out.failed)
    abort();
  /* Each allocation is written once; each free is written (as its block's collect) or counted
   * unknown; the collects of blocks whose free was lost are counted implied. */
  if (stats.allocations != allocs ||
      stats.frees - stats.implied_frees + stats.unknown_frees != frees)
    abort();
  check_trace(fd);
  free(e);
  rec_order_free(&order);
  rec_sites_free(&sites);
  rec_modules_free(&modules);
  rec_symboliser_free(symboliser);
  close(fd);
  return 0;
}
