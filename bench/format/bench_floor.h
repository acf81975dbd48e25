/* The floor of reading with backtraces (bench_floor.c), for bench_reader. */
#ifndef MEMTAP_BENCH_FORMAT_BENCH_FLOOR_H
#define MEMTAP_BENCH_FORMAT_BENCH_FLOOR_H

/* One pass over the plain (uncompressed, one-domain) trace at `path` doing only the work no reader
 * can skip; the events seen go to *events. Returns 0, or -1 on a trace it cannot follow. */
int bench_floor(const char *path, long *events);

#endif
