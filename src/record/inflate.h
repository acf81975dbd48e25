/* Separate debug files with compressed sections, inflated once for libdw (inflate.c). */
#ifndef MEMTAP_RECORD_INFLATE_H
#define MEMTAP_RECORD_INFLATE_H

/* `fd` (an open ELF file) when none of its .debug_* sections is zlib-compressed (SHF_COMPRESSED)
 * or anything fails; otherwise a new file descriptor (a memfd, `fd` closed) of the same ELF with
 * those sections inflated and no longer flagged compressed, except .debug_loclists and .debug_loc
 * (variable locations, which the symboliser never reads), which become SHT_NOBITS. Every other
 * byte keeps its offset, so program headers and notes still describe the file. */
int rec_inflate_debug_file(int fd);

/* Loads libdeflate (once, if installed). rec_inflate_debug_file does it when first needed; a
 * recorder calls it when it is made, because in-process mode finishes the trace inside the
 * program's exit (docs/tracer.md §9), where loading a library would run among the destructors. */
void rec_inflate_load(void);

/* debug_cache.c: a per-user cache of the copies rec_inflate_debug_file makes. */

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Caches copies in `dir` from now on (process-wide; NULL or "": no cache, the default). */
void rec_debug_cache_use(const char *dir);
/* A descriptor of the cached copy of `source` (its fstat) planned as `total` bytes whose section
 * header table (`shdrs_size` bytes at `shoff`) is `shdrs`; -1 if there is none that is exactly
 * that. */
int rec_debug_cache_open(const struct stat *source, uint64_t total, const void *shdrs,
                         size_t shdrs_size, uint64_t shoff);
/* Keeps a copy of `copy` (`total` bytes, made from `source`) in the cache; best effort. */
void rec_debug_cache_store(const struct stat *source, int copy, uint64_t total);

#endif
