/* Ring transport benchmark (issue 3: <= 15 ns median per 4-word record including the timestamp;
 * consumer >= 50 M records/s). Prints, for 4-word records (header, timestamp, two payload words):
 *   - the producer's cost per record, median and p99, for 1 and 2 writing threads, in
 *     flight-recorder mode and in lossless mode with a consumer thread keeping up: over batches of
 *     16 writes (lfence;rdtsc around the batch, minus the measured cost of the timing itself,
 *     divided by 16), over single writes (the serialising timing around one ~15 ns call inflates
 *     it), and the mean of an untimed run;
 *   - the consumer's throughput: one cursor draining a pre-filled ring, and one cursor keeping up
 *     with a lossless producer.
 * The ring file goes to $MEMTAP_RING_DIR, else /dev/shm. Prints figures; checks nothing. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "memtap/ring.h"
#include "ring/clock.h"

#define RECORDS 2000000u
#define WARMUP 300000u

static double tsc_ns; /* nanoseconds per TSC tick */
static double timing_overhead;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uint64_t stamp(void) {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

static mt_ring *open_ring(mt_ring_mode mode, uint64_t ring_size, mt_ring_clock clock) {
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  if (!getenv("MEMTAP_RING_DIR") && access("/dev/shm", W_OK) == 0)
    o.dir = "/dev/shm";
  o.mode = mode;
  o.ring_size = ring_size;
  o.max_rings = 8;
  o.clock = clock;
  o.attach_timeout_ms = 60000;
  mt_ring *r;
  mt_error err;
  if (mt_ring_open(&r, &o, &err) != MT_OK) {
    fprintf(stderr, "bench_ring: %s\n", err.message);
    exit(1);
  }
  return r;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

#define BATCH 16

struct producer {
  mt_ring *ring;
  uint32_t *samples; /* one write each, in ticks */
  uint32_t *batches; /* BATCH writes each, in ticks */
  double mean_ns;
  pthread_barrier_t *start;
};

static void *produce(void *p) {
  struct producer *pr = p;
  uint64_t payload[2] = {0x1234, 0};
  for (uint32_t i = 0; i < WARMUP; i++) { /* claims the ring, touches its pages */
    payload[1] = i;
    mt_ring_write(pr->ring, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
  }
  pthread_barrier_wait(pr->start);
  for (uint32_t i = 0; i < RECORDS; i++) {
    payload[1] = i;
    uint64_t t0 = stamp();
    mt_ring_write(pr->ring, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
    uint64_t t1 = stamp();
    pr->samples[i] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
  }
  for (uint32_t b = 0; b < RECORDS / BATCH; b++) {
    uint64_t t0 = stamp();
    for (uint32_t i = 0; i < BATCH; i++) {
      payload[1] = i;
      mt_ring_write(pr->ring, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
    }
    uint64_t t1 = stamp();
    pr->batches[b] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
  }
  /* Untimed pass for the mean: no rdtsc pairs inside the loop. */
  double t = now_s();
  for (uint32_t i = 0; i < RECORDS; i++) {
    payload[1] = i;
    mt_ring_write(pr->ring, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
  }
  pr->mean_ns = (now_s() - t) * 1e9 / RECORDS;
  return NULL;
}

struct consumer {
  mt_cursor *cursor;
  _Atomic int stop;
  uint64_t records;
};

static int count(void *user, const mt_ring_event *ev) {
  (void)ev;
  ((struct consumer *)user)->records++;
  return MT_CURSOR_NEXT;
}

static void *consume(void *p) {
  struct consumer *c = p;
  for (;;) {
    int stop = atomic_load(&c->stop);
    size_t got = 0;
    mt_cursor_poll(c->cursor, 0, &got, NULL);
    if (stop && !got)
      return NULL;
    if (!got)
      sched_yield();
  }
}

static void run_producers(const char *label, mt_ring_mode mode, int threads) {
  mt_ring *r = open_ring(mode, 1u << 20, MT_RING_CLOCK_AUTO);
  struct consumer con = {0};
  pthread_t consumer_thread;
  if (mode == MT_RING_LOSSLESS) {
    mt_error err;
    if (mt_cursor_open_file(&con.cursor, mt_ring_path(r), &err) != MT_OK ||
        mt_cursor_register_primary(con.cursor, &err) != MT_OK) {
      fprintf(stderr, "bench_ring: %s\n", err.message);
      exit(1);
    }
    mt_cursor_callbacks cb = {.other = count};
    mt_cursor_set_callbacks(con.cursor, &cb, &con);
    pthread_create(&consumer_thread, NULL, consume, &con);
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  struct producer prod[2];
  pthread_t tids[2];
  for (int i = 0; i < threads; i++) {
    prod[i] = (struct producer){r, malloc(RECORDS * sizeof(uint32_t)),
                                malloc(RECORDS / BATCH * sizeof(uint32_t)), 0, &start};
    pthread_create(&tids[i], NULL, produce, &prod[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(tids[i], NULL);
  if (mode == MT_RING_LOSSLESS) {
    atomic_store(&con.stop, 1);
    pthread_join(consumer_thread, NULL);
  }
  for (int i = 0; i < threads; i++) {
    qsort(prod[i].samples, RECORDS, sizeof(uint32_t), cmp_u32);
    qsort(prod[i].batches, RECORDS / BATCH, sizeof(uint32_t), cmp_u32);
    double median = (prod[i].samples[RECORDS / 2] - timing_overhead) * tsc_ns;
    double p99 = (prod[i].samples[RECORDS / 100 * 99] - timing_overhead) * tsc_ns;
    uint32_t nb = RECORDS / BATCH;
    double bmedian = (prod[i].batches[nb / 2] - timing_overhead) * tsc_ns / BATCH;
    double bp99 = (prod[i].batches[nb / 100 * 99] - timing_overhead) * tsc_ns / BATCH;
    printf("  %-32s thread %d  batch of %d: median %5.1f p99 %5.1f | single: median %5.1f p99 "
           "%5.1f | mean %5.1f ns\n",
           label, i + 1, BATCH, bmedian, bp99, median, p99, prod[i].mean_ns);
    free(prod[i].samples);
    free(prod[i].batches);
  }
  if (mode == MT_RING_LOSSLESS) {
    mt_ring_file_info info;
    mt_cursor_info(con.cursor, &info);
    printf("  %-32s consumer received %" PRIu64 " records, lost %" PRIu64 ", degraded %s\n", "",
           con.records, info.lost_records, info.degraded ? "yes" : "no");
    mt_cursor_close(con.cursor);
  }
  pthread_barrier_destroy(&start);
  mt_ring_close(r);
}

static void run_consumer_prefilled(void) {
  const uint32_t n = 4000000; /* 4-word records: 128 MB */
  mt_ring *r = open_ring(MT_RING_FLIGHT_RECORDER, 256u << 20, MT_RING_CLOCK_AUTO);
  uint64_t payload[2] = {1, 2};
  for (uint32_t i = 0; i < n; i++)
    mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
  double best = 0;
  for (int round = 0; round < 3; round++) {
    mt_cursor *c;
    mt_error err;
    if (mt_cursor_open_file(&c, mt_ring_path(r), &err) != MT_OK) {
      fprintf(stderr, "bench_ring: %s\n", err.message);
      exit(1);
    }
    struct consumer con = {c, 0, 0};
    mt_cursor_callbacks cb = {.other = count};
    mt_cursor_set_callbacks(c, &cb, &con);
    double t = now_s();
    size_t got;
    do
      mt_cursor_poll(c, 0, &got, NULL);
    while (got);
    double rate = con.records / (now_s() - t);
    if (rate > best)
      best = rate;
    mt_cursor_close(c);
  }
  printf("  %-40s %6.1f M records/s (best of 3, %u records)\n", "one cursor, pre-filled ring",
         best / 1e6, n);
  mt_ring_close(r);
}

static void run_consumer_live(void) {
  mt_ring *r = open_ring(MT_RING_LOSSLESS, 1u << 20, MT_RING_CLOCK_AUTO);
  struct consumer con = {0};
  mt_error err;
  if (mt_cursor_open_file(&con.cursor, mt_ring_path(r), &err) != MT_OK ||
      mt_cursor_register_primary(con.cursor, &err) != MT_OK) {
    fprintf(stderr, "bench_ring: %s\n", err.message);
    exit(1);
  }
  mt_cursor_callbacks cb = {.other = count};
  mt_cursor_set_callbacks(con.cursor, &cb, &con);
  pthread_t consumer_thread;
  double t = now_s();
  pthread_create(&consumer_thread, NULL, consume, &con);
  uint64_t payload[2] = {1, 2};
  const uint32_t n = 20000000;
  for (uint32_t i = 0; i < n; i++)
    mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
  atomic_store(&con.stop, 1);
  pthread_join(consumer_thread, NULL);
  double secs = now_s() - t;
  printf("  %-40s %6.1f M records/s (%" PRIu64 " records in %.2f s, lossless)\n",
         "one cursor keeping up with one producer", con.records / secs / 1e6, con.records, secs);
  mt_cursor_close(con.cursor);
  mt_ring_close(r);
}

static void run_clock_comparison(void) {
  const mt_ring_clock clocks[] = {MT_RING_CLOCK_TSC, MT_RING_CLOCK_MONOTONIC};
  const char *names[] = {"tsc", "monotonic"};
  for (int k = 0; k < 2; k++) {
    if (clocks[k] == MT_RING_CLOCK_TSC && !mt_clock_tsc_invariant())
      continue;
    mt_ring *r = open_ring(MT_RING_FLIGHT_RECORDER, 1u << 20, clocks[k]);
    uint64_t payload[2] = {1, 2};
    for (uint32_t i = 0; i < WARMUP; i++)
      mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
    double t = now_s();
    for (uint32_t i = 0; i < RECORDS; i++)
      mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 1, payload, 2);
    printf("  %-40s mean %6.1f ns\n", names[k], (now_s() - t) * 1e9 / RECORDS);
    mt_ring_close(r);
  }
}

int main(void) {
  tsc_ns = 1e9 / (double)mt_clock_hz(MT_RING_CLOCK_TSC);
  uint32_t *empty = malloc(1000000 * sizeof *empty);
  for (int i = 0; i < 1000000; i++) {
    uint64_t t0 = stamp();
    uint64_t t1 = stamp();
    empty[i] = (uint32_t)(t1 - t0);
  }
  qsort(empty, 1000000, sizeof *empty, cmp_u32);
  timing_overhead = empty[500000];
  free(empty);
  printf("memtap ring benchmark: 4-word records (header, timestamp, 2 payload words), 1 MiB rings,"
         " %ld CPUs\n",
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("TSC %.3f GHz; timing overhead %.0f ticks subtracted from each sample\n\n", 1 / tsc_ns,
         timing_overhead);
  printf("producer cost per record (%u records per thread)\n", RECORDS);
  run_producers("flight recorder, 1 thread", MT_RING_FLIGHT_RECORDER, 1);
  run_producers("flight recorder, 2 threads", MT_RING_FLIGHT_RECORDER, 2);
  run_producers("lossless + consumer, 1 thread", MT_RING_LOSSLESS, 1);
  run_producers("lossless + consumer, 2 threads", MT_RING_LOSSLESS, 2);
  printf("\nproducer mean cost by clock (flight recorder, 1 thread)\n");
  run_clock_comparison();
  printf("\nconsumer throughput\n");
  run_consumer_prefilled();
  run_consumer_live();
  return 0;
}
