/* Go trace construction for tests (go_trace_builder.h). */
#include "go_trace_builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gt_data(gt_bytes *b, const void *data, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->d = realloc(b->d, b->cap);
    if (!b->d)
      abort();
  }
  memcpy(b->d + b->n, data, n);
  b->n += n;
}

void gt_u8(gt_bytes *b, uint8_t v) {
  gt_data(b, &v, 1);
}

void gt_uv(gt_bytes *b, uint64_t v) {
  while (v >= 0x80) {
    gt_u8(b, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  gt_u8(b, (uint8_t)v);
}

void gt_header(gt_bytes *file, int version) {
  char h[17];
  snprintf(h, sizeof h, "go 1.%02d trace", version);
  gt_data(file, h, 13);
  gt_data(file, "\0\0\0", 3);
}

void gt_batch_start(gt_batch *b, uint64_t base_time) {
  memset(b, 0, sizeof *b);
  b->base = b->last = base_time;
}

void gt_event(gt_batch *b, uint8_t type, uint64_t time, int nargs, ...) {
  gt_u8(&b->b, type);
  gt_uv(&b->b, time - b->last);
  b->last = time;
  va_list ap;
  va_start(ap, nargs);
  for (int i = 0; i < nargs; i++)
    gt_uv(&b->b, va_arg(ap, uint64_t));
  va_end(ap);
}

void gt_batch_end(gt_bytes *file, gt_batch *b, uint8_t experiment, uint64_t gen, uint64_t m) {
  if (experiment) {
    gt_u8(file, 49);
    gt_u8(file, experiment);
  } else {
    gt_u8(file, 1);
  }
  gt_uv(file, gen);
  gt_uv(file, m);
  gt_uv(file, b->base);
  gt_uv(file, b->b.n);
  gt_data(file, b->b.d, b->b.n);
  free(b->b.d);
  memset(b, 0, sizeof *b);
}

void gt_frequency(gt_bytes *file, int version, uint64_t gen, uint64_t freq, uint64_t clock_tick,
                  uint64_t sec, uint64_t nsec) {
  gt_batch b;
  gt_batch_start(&b, clock_tick ? clock_tick : 1);
  if (version >= 25) {
    gt_u8(&b.b, 50);
    gt_u8(&b.b, 8);
    gt_uv(&b.b, freq);
    gt_u8(&b.b, 51);
    gt_uv(&b.b, 0);
    gt_uv(&b.b, 123456789);
    gt_uv(&b.b, sec);
    gt_uv(&b.b, nsec);
  } else {
    gt_u8(&b.b, 8);
    gt_uv(&b.b, freq);
  }
  gt_batch_end(file, &b, 0, gen, 0);
}

void gt_info(gt_bytes *file, uint64_t gen) {
  gt_batch b;
  gt_batch_start(&b, 1);
  gt_u8(&b.b, 1);
  gt_uv(&b.b, GT_MIN_HEAP);
  gt_uv(&b.b, 8192);
  gt_uv(&b.b, 8);
  gt_uv(&b.b, 2048);
  gt_batch_end(file, &b, 1, gen, 0);
}

void gt_types(gt_bytes *file, uint64_t gen, const gt_type *types, size_t n) {
  gt_batch b;
  gt_batch_start(&b, 1);
  gt_u8(&b.b, 0);
  for (size_t i = 0; i < n; i++) {
    gt_uv(&b.b, types[i].id);
    gt_uv(&b.b, 0x4a0000 + types[i].id * 64);
    gt_uv(&b.b, types[i].size);
    gt_uv(&b.b, 0);
    gt_uv(&b.b, strlen(types[i].name));
    gt_data(&b.b, types[i].name, strlen(types[i].name));
  }
  gt_batch_end(file, &b, 1, gen, 0);
}
