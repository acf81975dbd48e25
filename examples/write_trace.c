/* Example: writing a memtrace trace from C with the memtap writer API. It simulates a program with
 * three allocation sites (one of them leaks) and writes what a sampling tracer would record, so the
 * result opens in `memtap` and in memtrace's own tools and viewer.
 *
 *   write_trace OUT.ctf [--version 2|3] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "memtap/format.h"

/* Location codes: any value in [1, 2^62) that stands for one return address. */
enum {
  MAIN = 0x401000,
  PARSE = 0x401100,
  READ_LINE = 0x401200,
  CACHE_PUT = 0x401300,
  XMALLOC = 0x401400
};

/* The writer asks for a code's location list the first time it meets the code (and again if it
 * was evicted from its cache). One entry per inlined function, outermost first. */
static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static const mt_location main_loc = {"example/main.c", "main", 42, 3, 20};
  static const mt_location parse_loc = {"example/parse.c", "parse_file", 17, 5, 30};
  static const mt_location read_loc[] = {{"example/parse.c", "read_line", 88, 9, 40},
                                         {"example/strbuf.h", "strbuf_grow", 12, 3, 25}};
  static const mt_location cache_loc = {"example/cache.c", "cache_put", 61, 7, 33};
  static const mt_location xmalloc_loc = {"example/xmalloc.c", "xmalloc", 9, 10, 21};
  switch (code) {
  case MAIN: *entries = &main_loc, *count = 1; break;
  case PARSE: *entries = &parse_loc, *count = 1; break;
  case READ_LINE: *entries = read_loc, *count = 2; break; /* strbuf_grow inlined into read_line */
  case CACHE_PUT: *entries = &cache_loc, *count = 1; break;
  case XMALLOC: *entries = &xmalloc_loc, *count = 1; break;
  default: *count = 0;
  }
  return MT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help")) {
    fprintf(argc < 2 ? stderr : stdout, "usage: write_trace OUT.ctf [--version 2|3]\n");
    return argc < 2 ? 64 : 0;
  }
  mt_writer_options options = {.version =
                                   argc > 3 && !strcmp(argv[2], "--version") ? atoi(argv[3]) : 3};
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  int64_t start = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  mt_trace_info info = {.start_time = start,
                        .sample_rate = 1.0 / 4096,
                        .word_size = 64,
                        .executable_name = "example/parse-and-cache",
                        .host_name = host,
                        .ocaml_runtime_params = "memtap-example",
                        .pid = getpid(),
                        .context = "written by examples/write_trace.c"};
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, fd, &info, &options, &err)) {
    fprintf(stderr, "write_trace: %s\n", err.message);
    return 1;
  }
  /* Call stacks are innermost first: the allocation point, then its callers. */
  const uint64_t line_stack[] = {XMALLOC, READ_LINE, PARSE, MAIN};
  const uint64_t cache_stack[] = {XMALLOC, CACHE_PUT, PARSE, MAIN};
  int64_t line_ids[8] = {0}, t = start;
  int rc = MT_OK;
  for (int i = 0; i < 2000 && rc == MT_OK; i++) {
    t += 50 + i % 7;
    int64_t id;
    /* A 1 KiB line buffer, recorded with one sample, freed eight iterations later. */
    rc = mt_writer_put_alloc(w, t, 128, 1, MT_SOURCE_EXTERNAL, line_stack, 4, resolve, NULL, &id,
                             &err);
    if (rc == MT_OK && line_ids[i % 8])
      rc = mt_writer_put_collect(w, t + 10, line_ids[i % 8], &err);
    line_ids[i % 8] = id;
    /* Every 10th iteration the cache keeps a 4 KiB entry forever: a leak. */
    if (rc == MT_OK && i % 10 == 0)
      rc = mt_writer_put_alloc(w, t + 20, 512, 1, MT_SOURCE_EXTERNAL, cache_stack, 4, resolve, NULL,
                               NULL, &err);
  }
  if (rc) {
    fprintf(stderr, "write_trace: %s\n", err.message);
    mt_writer_close(w, NULL);
    return 1;
  }
  if (mt_writer_close(w, &err)) {
    fprintf(stderr, "write_trace: %s\n", err.message);
    return 1;
  }
  close(fd);
  return 0;
}
