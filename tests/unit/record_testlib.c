/* Helpers of the recorder's tests (record_testlib.h). */
#include "record_testlib.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "memtap/tracer.h"

mt_ring *rr_open(bool full, double rate) {
  mt_ring_options o;
  mt_error err = {0};
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.mode = MT_RING_FLIGHT_RECORDER;
  o.ring_size = 1 << 20;
  o.max_rings = 16;
  o.registry_size = 256 * 1024;
  o.preserve = true;
  mt_ring *r = NULL;
  if (mt_ring_open(&r, &o, &err) != MT_OK)
    fail_msg("mt_ring_open: %s", err.message);
  static const char exe[] = "/usr/bin/traced-program";
  uint8_t buf[sizeof(mt_tracer_process) + sizeof exe];
  mt_tracer_process p = {.sample_rate = full ? 1 : rate,
                         .flags = full ? MT_TRACER_PROCESS_FULL : 0,
                         .exe_length = sizeof exe - 1,
                         .pid = getpid()};
  memcpy(buf, &p, sizeof p);
  memcpy(buf + sizeof p, exe, sizeof exe - 1);
  assert_int_equal(
      mt_ring_register(r, MT_TRACER_REGISTRY_PROCESS, 0, buf, sizeof p + sizeof exe - 1), MT_OK);
  return r;
}

void rr_module(mt_ring *r, uint64_t serial, uint64_t bias, uint64_t low, uint64_t high,
               const char *path, const void *build_id, size_t build_id_length) {
  size_t path_length = strlen(path);
  size_t size = sizeof(mt_tracer_module) + build_id_length + path_length;
  uint8_t *buf = malloc(size);
  assert_non_null(buf);
  mt_tracer_module m = {.load_bias = bias,
                        .low = low,
                        .high = high,
                        .build_id_length = (uint32_t)build_id_length,
                        .path_length = (uint32_t)path_length};
  memcpy(buf, &m, sizeof m);
  memcpy(buf + sizeof m, build_id, build_id_length);
  memcpy(buf + sizeof m + build_id_length, path, path_length);
  assert_int_equal(mt_ring_register(r, MT_TRACER_REGISTRY_MODULE, serial, buf, size), MT_OK);
  free(buf);
}

struct find {
  uintptr_t address;
  bool found;
  uint64_t bias, low, high;
  char path[4096];
  uint8_t build_id[64];
  size_t build_id_length;
};

static int find_module(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  struct find *f = user;
  uint64_t low = UINT64_MAX, high = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uint64_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    low = start < low ? start : low;
    high = end > high ? end : high;
  }
  if (f->address < low || f->address >= high)
    return 0;
  f->found = true;
  f->bias = info->dlpi_addr;
  f->low = low;
  f->high = high;
  if (info->dlpi_name && info->dlpi_name[0]) {
    snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
  } else {
    ssize_t n = readlink("/proc/self/exe", f->path, sizeof f->path - 1);
    f->path[n > 0 ? n : 0] = 0;
  }
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
      const uint8_t *desc = p + sizeof *n + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_descsz <= sizeof f->build_id) {
        memcpy(f->build_id, desc, n->n_descsz);
        f->build_id_length = n->n_descsz;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

void rr_module_of(mt_ring *r, uint64_t serial, const void *address) {
  struct find f = {.address = (uintptr_t)address};
  dl_iterate_phdr(find_module, &f);
  assert_true(f.found);
  rr_module(r, serial, f.bias, f.low, f.high, f.path, f.build_id, f.build_id_length);
}

void rr_module_self(mt_ring *r, uint64_t serial) {
  rr_module_of(r, serial, (const void *)rr_module_self);
}

static void write_record(mt_ring *r, unsigned type, const uint64_t *payload, size_t words,
                         unsigned id) {
  assert_int_equal(mt_ring_write(r, type, id, payload, words), MT_OK);
}

void rr_alloc_kind(mt_ring *r, uint64_t addr, uint64_t size, const uint64_t *frames, size_t nframes,
                   uint64_t kind) {
  uint64_t p[4 + 64] = {addr, size, size ? (size + 7) / 8 : 1, kind};
  if (nframes)
    memcpy(p + 4, frames, nframes * sizeof *frames);
  write_record(r, MT_TRACER_REC_ALLOC, p, 4 + nframes, (unsigned)nframes);
}

void rr_alloc(mt_ring *r, uint64_t addr, uint64_t size, const uint64_t *frames, size_t nframes) {
  rr_alloc_kind(r, addr, size, frames, nframes, MT_TRACER_KIND_MALLOC);
}

void rr_free(mt_ring *r, uint64_t addr) {
  write_record(r, MT_TRACER_REC_FREE, &addr, 1, 0);
}

void rr_realloc(mt_ring *r, uint64_t old_addr, uint64_t new_addr, uint64_t size) {
  uint64_t p[5] = {old_addr, new_addr, size, (size + 7) / 8, MT_TRACER_KIND_REALLOC};
  write_record(r, MT_TRACER_REC_REALLOC, p, 5, 0);
}

void rr_map(mt_ring *r, uint64_t addr, uint64_t length) {
  uint64_t p[4] = {addr, length, 3, MT_TRACER_KIND_MMAP};
  write_record(r, MT_TRACER_REC_MAP, p, 4, 0);
}

void rr_unmap(mt_ring *r, uint64_t addr, uint64_t length) {
  uint64_t p[2] = {addr, length};
  write_record(r, MT_TRACER_REC_UNMAP, p, 2, 0);
}

void rr_unload(mt_ring *r, uint64_t serial) {
  write_record(r, MT_TRACER_REC_MODULE_UNLOAD, &serial, 1, 0);
}

const char *rr_record(mt_ring *r, const char *name, const mt_recorder_options *options,
                      mt_recorder_stats *stats) {
  static char ring_path[4096];
  snprintf(ring_path, sizeof ring_path, "%s", mt_ring_path(r));
  assert_int_equal(mt_ring_close(r), MT_OK);
  const char *out = tu_temp_path(name);
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  mt_recorder *rec;
  mt_error err = {0};
  assert_int_equal(mt_recorder_create(&rec, fd, options, &err), MT_OK);
  if (mt_recorder_attach(rec, ring_path, true, &err))
    fail_msg("attach: %s", err.message);
  bool progress;
  assert_int_equal(mt_recorder_poll(rec, &progress, &err), MT_OK);
  assert_true(progress);
  assert_true(mt_recorder_done(rec));
  int rc = mt_recorder_finish(rec, &err);
  mt_recorder_stats_get(rec, stats);
  if (!stats->failed)
    assert_int_equal(rc, MT_OK);
  mt_recorder_destroy(rec);
  close(fd);
  unlink(ring_path);
  return out;
}

static void check_and_add(rr_trace *t, const mt_event *e, bool *live, size_t live_cap) {
  if (t->count)
    assert_true(e->time >= t->events[t->count - 1].time);
  assert_true(e->obj_id >= 0 && (size_t)e->obj_id < live_cap);
  if (e->kind == MT_EVENT_ALLOC) {
    assert_false(live[e->obj_id]);
    live[e->obj_id] = true;
  } else if (e->kind == MT_EVENT_COLLECT) {
    assert_true(live[e->obj_id]); /* never a collect of an unknown or dead object */
    live[e->obj_id] = false;
  }
  if (t->count == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 64;
    t->events = realloc(t->events, t->cap * sizeof *t->events);
    assert_non_null(t->events);
  }
  rr_event *r = &t->events[t->count++];
  memset(r, 0, sizeof *r);
  r->kind = e->kind;
  r->time = e->time;
  r->obj_id = e->obj_id;
  r->length = e->length;
  r->nsamples = e->nsamples;
  r->source = e->source;
  r->depth = e->backtrace_length < 64 ? e->backtrace_length : 64;
  if (e->backtrace)
    memcpy(r->codes, e->backtrace, r->depth * sizeof r->codes[0]);
}

void rr_read(const char *path, rr_trace *out) {
  memset(out, 0, sizeof *out);
  mt_reader_options o = {.backtraces = true};
  mt_error err = {0};
  if (mt_reader_open(&out->reader, path, &o, &err))
    fail_msg("%s: %s", path, err.message);
  bool *live = calloc(1 << 20, 1);
  assert_non_null(live);
  mt_event e;
  int rc;
  while ((rc = mt_reader_next(out->reader, &e, &err)) == 1)
    check_and_add(out, &e, live, 1 << 20);
  if (rc)
    fail_msg("%s: %s", path, err.message);
  assert_false(mt_reader_truncated(out->reader, NULL));
  free(live);
}

void rr_trace_free(rr_trace *t) {
  mt_reader_close(t->reader);
  free(t->events);
  memset(t, 0, sizeof *t);
}

const mt_location *rr_locations(const rr_trace *t, int64_t code, size_t *count) {
  const mt_location *entries = NULL;
  if (!mt_reader_lookup_location(t->reader, code, &entries, count))
    fail_msg("code %lld not described", (long long)code);
  return entries;
}
