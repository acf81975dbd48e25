/* The consumer's own throughput (bench/record/README.md): synthetic tracer records in the shim's
 * schema (memtap/tracer.h), written by this process into a real ring file, then read by a
 * mt_recorder that writes the trace; only the recorder's polls and its finish are timed, so what
 * is measured is the consumer alone (decoding, merge, causal repair, codes, the writer, zstd).
 *
 * The default stream is single-threaded churn in full mode, as bench/tracer/churn.c makes it: a
 * table of 1024 live blocks (--live N), each step freeing a random slot's block and
 * allocating 16..255 bytes in its place from one call site, addresses reused LIFO per 16-byte class
 * as glibc's tcache does. Options change the number of writing threads, of distinct call stacks and
 * their depth. With --threads T, T new threads write each batch (each a new source for the merge);
 * with --same-threads, T threads write every batch of a pass, as a program's long-lived threads do.
 *
 * Usage: bench_record [--events N] [--threads T] [--same-threads] [--sites S] [--depth D]
 *                     [--compress] [--level L] [--v2] [--symbols] [--out FILE] [--batch B]
 *                     [--repeat R] [--lag MS] [--live N]
 * Prints one line per pass (wall and CPU time of the consumer) and the best pass by CPU time, a
 * line ending in events/s: records read per second of the process's CPU time while it polled. */
#include <elf.h>
#include <fcntl.h>
#include <getopt.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memtap/record.h"
#include "memtap/ring.h"
#include "memtap/tracer.h"

#define MAX_DEPTH 64u

typedef struct config {
  uint64_t events; /* records in total (a churn step is two) */
  int threads, sites, depth, repeat;
  size_t batch; /* records per thread between two rounds of polling */
  bool compress, v2, symbols;
  bool same_threads; /* the same T threads write every batch (else T new ones per batch) */
  int level;         /* zstd level with --compress (0: the recorder's default) */
  int lag;           /* mt_recorder_options.merge_lag_ms (0: the recorder's default) */
  uint64_t live; /* blocks in each writer's churn table: the address map holds about that many */
  const char *out;
} config;

/* One synthetic writer: its churn table, its little allocator, its stacks. */
typedef struct writer {
  uint64_t rng;
  uint64_t *slot;          /* cfg->live of them */
  uint64_t *free_list[16]; /* LIFO of freed addresses per 16-byte class */
  size_t free_count[16], free_cap[16];
  uint64_t bump;
  uint64_t frames[MAX_DEPTH];
  const config *cfg;
  mt_ring *ring;
  uint64_t steps;   /* churn steps done */
  uint64_t records; /* records written */
} writer;

static uint64_t module_low, module_high;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the whole process (the consumer and any thread of its own, e.g. a compressor):
 * the machine may be shared, and wall time then measures the neighbours too. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *message) {
  fprintf(stderr, "bench_record: %s%s%s\n", what, message ? ": " : "", message ? message : "");
  exit(1);
}

static uint64_t next_random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* --- the registry: the process and this executable as module 1 ------------------------------ */

static int find_self(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  mt_ring *ring = user;
  uint64_t low = UINT64_MAX, high = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uint64_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    low = start < low ? start : low;
    high = end > high ? end : high;
  }
  uintptr_t self = (uintptr_t)find_self;
  if (self < low || self >= high)
    return 0;
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  path[n > 0 ? n : 0] = 0;
  uint8_t build_id[64];
  size_t build_id_length = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)p;
      const uint8_t *desc = p + sizeof *note + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_descsz <= sizeof build_id) {
        memcpy(build_id, desc, note->n_descsz);
        build_id_length = note->n_descsz;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  size_t path_length = strlen(path);
  uint8_t buf[sizeof(mt_tracer_module) + sizeof build_id + sizeof path];
  mt_tracer_module m = {.load_bias = info->dlpi_addr,
                        .low = low,
                        .high = high,
                        .build_id_length = (uint32_t)build_id_length,
                        .path_length = (uint32_t)path_length};
  memcpy(buf, &m, sizeof m);
  memcpy(buf + sizeof m, build_id, build_id_length);
  memcpy(buf + sizeof m + build_id_length, path, path_length);
  if (mt_ring_register(ring, MT_TRACER_REGISTRY_MODULE, 1, buf,
                       sizeof m + build_id_length + path_length))
    die("registering the module", NULL);
  module_low = low;
  module_high = high;
  return 1;
}

static mt_ring *open_ring(const config *cfg, const char *dir) {
  mt_ring_options o;
  mt_error err = {0};
  if (mt_ring_options_init(&o, &err))
    die("ring options", err.message);
  o.dir = dir;
  /* Lossless, read by the recorder as the primary, as memtap record reads a traced program's file
   * (in place, ring/consumer.c). Room for a whole batch of the deepest records: a writer never
   * waits for the poll that follows its batch. */
  o.mode = MT_RING_LOSSLESS;
  uint64_t need = (uint64_t)cfg->batch * (6 + 4 + (uint64_t)cfg->depth) * 8 * 2;
  o.ring_size = 1u << 20;
  while (o.ring_size < need)
    o.ring_size *= 2;
  o.max_rings = (uint32_t)cfg->threads + 2;
  o.registry_size = 256 * 1024;
  o.preserve = true;
  mt_ring *ring;
  if (mt_ring_open(&ring, &o, &err))
    die("mt_ring_open", err.message);
  static const char exe[] = "/usr/bin/churn";
  uint8_t buf[sizeof(mt_tracer_process) + sizeof exe];
  mt_tracer_process p = {.sample_rate = 1,
                         .flags = MT_TRACER_PROCESS_FULL,
                         .exe_length = sizeof exe - 1,
                         .pid = getpid()};
  memcpy(buf, &p, sizeof p);
  memcpy(buf + sizeof p, exe, sizeof exe - 1);
  if (mt_ring_register(ring, MT_TRACER_REGISTRY_PROCESS, 0, buf, sizeof p + sizeof exe - 1))
    die("registering the process", NULL);
  dl_iterate_phdr(find_self, ring);
  if (!module_low)
    die("finding this executable's module", NULL);
  return ring;
}

/* --- the synthetic churn ------------------------------------------------------------------- */

static uint64_t take_address(writer *w, size_t size) {
  unsigned c = (unsigned)(size / 16) & 15;
  if (w->free_count[c])
    return w->free_list[c][--w->free_count[c]];
  uint64_t a = w->bump;
  w->bump += (size + 31) & ~(uint64_t)15;
  return a;
}

static void give_address(writer *w, uint64_t addr, size_t size) {
  unsigned c = (unsigned)(size / 16) & 15;
  if (w->free_count[c] == w->free_cap[c]) {
    w->free_cap[c] = w->free_cap[c] ? w->free_cap[c] * 2 : 256;
    w->free_list[c] = realloc(w->free_list[c], w->free_cap[c] * sizeof(uint64_t));
    if (!w->free_list[c])
      die("out of memory", NULL);
  }
  w->free_list[c][w->free_count[c]++] = addr;
}

/* The stack of call site `site`: `depth` return addresses inside this executable, the outer ones
 * shared by every site (main and what calls it), the innermost one the site's own. */
static void site_stack(const config *cfg, uint64_t *frames, unsigned site) {
  uint64_t span = module_high - module_low;
  for (int i = 0; i < cfg->depth; i++)
    frames[i] = module_low + 64 + (uint64_t)(cfg->depth - i) * 97 % (span - 128);
  if (cfg->sites > 1) {
    frames[0] = module_low + 1024 + (uint64_t)site * 13 % (span - 2048);
    if (cfg->depth > 2)
      frames[1] = module_low + 4096 + (uint64_t)(site % 7) * 29 % (span - 8192);
  }
}

static void write_or_die(writer *w, unsigned type, unsigned id, const uint64_t *p, size_t n) {
  if (mt_ring_write(w->ring, type, id, p, n))
    die("mt_ring_write", NULL);
  w->records++;
}

/* One batch of churn steps (two records each). */
static void churn_batch(writer *w, uint64_t steps) {
  const config *cfg = w->cfg;
  uint64_t payload[4 + MAX_DEPTH];
  for (uint64_t i = 0; i < steps; i++) {
    uint64_t r = next_random(&w->rng);
    uint64_t k = r % cfg->live;
    size_t size = 16 + (size_t)((r >> 32) % 240);
    if (w->slot[k]) {
      uint64_t old = w->slot[k] & ~(uint64_t)0xf;
      write_or_die(w, MT_TRACER_REC_FREE, 0, &old, 1);
      give_address(w, old, (size_t)(w->slot[k] & 0xf) * 16);
    }
    uint64_t addr = take_address(w, size);
    payload[0] = addr;
    payload[1] = size;
    payload[2] = (size + 7) / 8;
    payload[3] = MT_TRACER_KIND_MALLOC;
    unsigned site = cfg->sites > 1 ? (unsigned)(r >> 20) % (unsigned)cfg->sites : 0;
    site_stack(cfg, payload + 4, site);
    write_or_die(w, MT_TRACER_REC_ALLOC, (unsigned)cfg->depth, payload, 4 + (size_t)cfg->depth);
    /* The slot remembers the size class in the address's low bits (blocks are 16-aligned). */
    w->slot[k] = addr | (size / 16);
    w->steps++;
  }
}

typedef struct batch_job {
  writer *w;
  uint64_t steps;
} batch_job;

static void *batch_thread(void *arg) {
  batch_job *job = arg;
  churn_batch(job->w, job->steps);
  return NULL;
}

/* --same-threads: a pool of writers that live for the whole pass. Each batch starts when the main
 * thread joins `start` (with `steps` set, 0 to end) and is written when it joins `done`; in between
 * the main thread waits, and during the polls the writers wait, blocked, using no CPU. */
typedef struct pool {
  pthread_barrier_t start, done;
  uint64_t steps;
  writer *w;
} pool;

typedef struct pool_job {
  pool *p;
  int index;
} pool_job;

static void *pool_thread(void *arg) {
  pool_job *job = arg;
  pool *p = job->p;
  for (;;) {
    pthread_barrier_wait(&p->start);
    if (!p->steps)
      return NULL;
    churn_batch(&p->w[job->index], p->steps);
    pthread_barrier_wait(&p->done);
  }
}

/* --- one pass ------------------------------------------------------------------------------ */

typedef struct result {
  double seconds, cpu;
  uint64_t records, events, bytes;
} result;

static void poll_until(mt_recorder *rec, uint64_t records, double *timed, double *cpu) {
  mt_recorder_stats st;
  mt_error err = {0};
  for (;;) {
    double t0 = now_s(), c0 = cpu_s();
    if (mt_recorder_poll(rec, NULL, &err))
      die("mt_recorder_poll", err.message);
    *timed += now_s() - t0;
    *cpu += cpu_s() - c0;
    mt_recorder_stats_get(rec, &st);
    if (st.records >= records)
      return;
  }
}

static result run_pass(const config *cfg, const char *dir, int pass) {
  mt_ring *ring = open_ring(cfg, dir);
  char path[4096];
  if (mt_ring_file_path(path, sizeof path, dir, getpid()))
    die("ring path", NULL);
  int fd = open(cfg->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    die(cfg->out, "cannot open");
  mt_recorder_options ro = {.version = cfg->v2 ? 2 : 3,
                            .compress = cfg->compress,
                            .compress_level = cfg->level,
                            .merge_lag_ms = cfg->lag,
                            .no_symbols = !cfg->symbols,
                            .context = "bench_record"};
  mt_recorder *rec;
  mt_error err = {0};
  if (mt_recorder_create(&rec, fd, &ro, &err))
    die("mt_recorder_create", err.message);
  if (mt_recorder_attach(rec, path, true, &err))
    die("mt_recorder_attach", err.message);

  writer *ws = calloc((size_t)cfg->threads, sizeof *ws);
  if (!ws)
    die("out of memory", NULL);
  for (int t = 0; t < cfg->threads; t++)
    ws[t] = (writer){.rng = 0x9E3779B97F4A7C15ULL + (uint64_t)t + (uint64_t)pass * 1000,
                     .slot = calloc(cfg->live, sizeof(uint64_t)),
                     .bump = ((uint64_t)1 << 40) * (uint64_t)(t + 1),
                     .cfg = cfg,
                     .ring = ring};
  for (int t = 0; t < cfg->threads; t++)
    if (!ws[t].slot)
      die("out of memory", NULL);
  uint64_t total_steps = cfg->events / 2, done = 0;
  double timed = 0, cpu = 0;
  uint64_t per_batch = cfg->batch / 2;
  pool pl = {.w = ws};
  pthread_t pool_tid[64];
  pool_job pool_jobs[64];
  bool pooled = cfg->same_threads && cfg->threads > 1;
  if (pooled) {
    if (pthread_barrier_init(&pl.start, NULL, (unsigned)cfg->threads + 1) ||
        pthread_barrier_init(&pl.done, NULL, (unsigned)cfg->threads + 1))
      die("pthread_barrier_init", NULL);
    for (int t = 0; t < cfg->threads; t++) {
      pool_jobs[t] = (pool_job){&pl, t};
      if (pthread_create(&pool_tid[t], NULL, pool_thread, &pool_jobs[t]))
        die("pthread_create", NULL);
    }
  }
  while (done < total_steps) {
    uint64_t steps = total_steps - done < per_batch * (uint64_t)cfg->threads
                         ? (total_steps - done) / (uint64_t)cfg->threads + 1
                         : per_batch;
    if (cfg->threads == 1) {
      churn_batch(&ws[0], steps);
    } else if (pooled) {
      pl.steps = steps;
      pthread_barrier_wait(&pl.start);
      pthread_barrier_wait(&pl.done);
    } else {
      pthread_t tid[64];
      batch_job jobs[64];
      for (int t = 0; t < cfg->threads; t++) {
        jobs[t] = (batch_job){&ws[t], steps};
        if (pthread_create(&tid[t], NULL, batch_thread, &jobs[t]))
          die("pthread_create", NULL);
      }
      for (int t = 0; t < cfg->threads; t++)
        pthread_join(tid[t], NULL);
    }
    done += steps * (uint64_t)cfg->threads;
    uint64_t written = 0;
    for (int t = 0; t < cfg->threads; t++)
      written += ws[t].records;
    poll_until(rec, written, &timed, &cpu);
  }
  if (pooled) {
    pl.steps = 0;
    pthread_barrier_wait(&pl.start);
    for (int t = 0; t < cfg->threads; t++)
      pthread_join(pool_tid[t], NULL);
    pthread_barrier_destroy(&pl.start);
    pthread_barrier_destroy(&pl.done);
  }
  mt_ring_close(ring);
  double t0 = now_s(), c0 = cpu_s();
  if (mt_recorder_finish(rec, &err))
    die("mt_recorder_finish", err.message);
  timed += now_s() - t0;
  cpu += cpu_s() - c0;
  mt_recorder_stats st;
  mt_recorder_stats_get(rec, &st);
  mt_recorder_destroy(rec);
  close(fd);
  unlink(path);
  for (int t = 0; t < cfg->threads; t++) {
    for (int c = 0; c < 16; c++)
      free(ws[t].free_list[c]);
    free(ws[t].slot);
  }
  free(ws);
  if (st.lost_records)
    fprintf(stderr, "bench_record: %llu records lost (the ring was too small)\n",
            (unsigned long long)st.lost_records);
  return (result){.seconds = timed,
                  .cpu = cpu,
                  .records = st.records,
                  .events = st.allocations + st.frees,
                  .bytes = st.bytes};
}

int main(int argc, char **argv) {
  config cfg = {.events = 20000000,
                .threads = 1,
                .sites = 1,
                .depth = 5,
                .repeat = 3,
                .batch = 1 << 16,
                .live = 1024,
                .out = "/dev/null"};
  enum {
    O_EVENTS = 256,
    O_THREADS,
    O_SITES,
    O_DEPTH,
    O_COMPRESS,
    O_V2,
    O_SYMBOLS,
    O_OUT,
    O_BATCH,
    O_REPEAT,
    O_LEVEL,
    O_LAG,
    O_LIVE,
    O_SAME_THREADS
  };
  static const struct option options[] = {{"events", required_argument, NULL, O_EVENTS},
                                          {"threads", required_argument, NULL, O_THREADS},
                                          {"sites", required_argument, NULL, O_SITES},
                                          {"depth", required_argument, NULL, O_DEPTH},
                                          {"compress", no_argument, NULL, O_COMPRESS},
                                          {"v2", no_argument, NULL, O_V2},
                                          {"symbols", no_argument, NULL, O_SYMBOLS},
                                          {"out", required_argument, NULL, O_OUT},
                                          {"batch", required_argument, NULL, O_BATCH},
                                          {"repeat", required_argument, NULL, O_REPEAT},
                                          {"level", required_argument, NULL, O_LEVEL},
                                          {"lag", required_argument, NULL, O_LAG},
                                          {"live", required_argument, NULL, O_LIVE},
                                          {"same-threads", no_argument, NULL, O_SAME_THREADS},
                                          {0}};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
    case O_EVENTS: cfg.events = strtoull(optarg, NULL, 10); break;
    case O_THREADS: cfg.threads = atoi(optarg); break;
    case O_SITES: cfg.sites = atoi(optarg); break;
    case O_DEPTH: cfg.depth = atoi(optarg); break;
    case O_COMPRESS: cfg.compress = true; break;
    case O_V2: cfg.v2 = true; break;
    case O_SYMBOLS: cfg.symbols = true; break;
    case O_OUT: cfg.out = optarg; break;
    case O_BATCH: cfg.batch = (size_t)strtoull(optarg, NULL, 10); break;
    case O_REPEAT: cfg.repeat = atoi(optarg); break;
    case O_LEVEL: cfg.level = atoi(optarg); break;
    case O_LAG: cfg.lag = atoi(optarg); break;
    case O_LIVE: cfg.live = strtoull(optarg, NULL, 10); break;
    case O_SAME_THREADS: cfg.same_threads = true; break;
    default:
      fprintf(stderr, "usage: bench_record [--events N] [--threads T] [--same-threads] [--sites S] "
                      "[--depth D] [--compress] [--level L] [--v2] [--symbols] [--out FILE] "
                      "[--batch B] [--repeat R] [--lag MS] [--live N]\n");
      return 64;
    }
  }
  if (cfg.threads < 1 || cfg.threads > 64 || cfg.sites < 1 || cfg.depth < 1 ||
      cfg.depth > (int)MAX_DEPTH || cfg.batch < 16 || cfg.repeat < 1 || cfg.events < 4 ||
      cfg.live < 1 || cfg.live > ((uint64_t)1 << 28))
    die("an option is out of range", NULL);
  /* tmpfs when there is one: a ring file on disk costs page write-back, not the consumer. */
  char dir[] = "/dev/shm/bench-record-XXXXXX";
  char dir2[] = "/tmp/bench-record-XXXXXX";
  const char *d = mkdtemp(dir);
  if (!d && !(d = mkdtemp(dir2)))
    die("mkdtemp", NULL);
  double best = 0;
  result keep = {0};
  for (int pass = 0; pass < cfg.repeat; pass++) {
    result r = run_pass(&cfg, d, pass);
    double rate = (double)r.records / r.cpu;
    printf("pass %d: %llu records, %llu events, %.3f s wall, %.3f s cpu, %.2f B/event, %.1f M "
           "records/s wall, %.1f M records/s cpu\n",
           pass, (unsigned long long)r.records, (unsigned long long)r.events, r.seconds, r.cpu,
           (double)r.bytes / (double)r.events, (double)r.records / r.seconds / 1e6, rate / 1e6);
    if (rate > best) {
      best = rate;
      keep = r;
    }
  }
  rmdir(d);
  printf("bench_record: threads %d%s, sites %d, depth %d%s: best %.3f s cpu for %llu records, %.2f "
         "B/event, %.0f events/s (cpu)\n",
         cfg.threads, cfg.same_threads && cfg.threads > 1 ? " (the same)" : "", cfg.sites,
         cfg.depth, cfg.compress ? ", compressed" : "", keep.cpu, (unsigned long long)keep.records,
         (double)keep.bytes / (double)keep.events, best);
  return 0;
}
