/* Separate debug files with compressed sections, inflated once for libdw (docs/record.md,
 * "Symbolisation"). libdw inflates every SHF_COMPRESSED debug section of a file when it opens it,
 * with zlib, into fresh heap memory, the variable location lists the symboliser never reads
 * included: for libc6-dbg's libc (4.4 MB of sections, 10 MB inflated), needed for the frames at
 * the bottom of every stack, that was three quarters of `memtap record`'s own CPU on a short
 * program. Here the file is copied into a memfd with the sections already inflated, by libdeflate
 * when it is installed (about twice zlib's speed; loaded at run time, as it is optional) else
 * zlib, straight into the memfd's pages, and the location lists left out; libdw then maps the copy
 * and finds nothing to inflate. Bytes that are not inflated keep their offsets (program headers and
 * notes still point at them); the inflated sections and the new section header table follow the
 * original file's end, and the compressed bytes become a hole that is never written. */
#include "common/file_size_limit.h"
#include "record/inflate.h"

#include <dlfcn.h>
#include <elf.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* libdeflate's decompression entry points (libdeflate.h, stable since 1.0). */
typedef void *(*deflate_alloc_fn)(void);
typedef int (*deflate_zlib_fn)(void *, const void *, size_t, void *, size_t, size_t *);
typedef void (*deflate_free_fn)(void *);

static struct {
  deflate_alloc_fn alloc;
  deflate_zlib_fn zlib;
  deflate_free_fn free;
} libdeflate;

static void load_deflate(void) {
  void *h = dlopen("libdeflate.so.0", RTLD_LAZY | RTLD_LOCAL);
  if (!h)
    return;
  *(void **)&libdeflate.alloc = dlsym(h, "libdeflate_alloc_decompressor");
  *(void **)&libdeflate.zlib = dlsym(h, "libdeflate_zlib_decompress");
  *(void **)&libdeflate.free = dlsym(h, "libdeflate_free_decompressor");
  if (!libdeflate.alloc || !libdeflate.zlib || !libdeflate.free)
    libdeflate.alloc = NULL;
}

void rec_inflate_load(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_deflate);
}

/* Inflates the zlib stream `in` into exactly `out_size` bytes at `out`. */
static bool inflate_exact(void **decompressor, const void *in, size_t in_size, void *out,
                          size_t out_size) {
  rec_inflate_load();
  if (libdeflate.alloc && (*decompressor || (*decompressor = libdeflate.alloc())))
    return libdeflate.zlib(*decompressor, in, in_size, out, out_size, NULL) == 0;
  uLongf got = out_size;
  return uncompress(out, &got, in, in_size) == Z_OK && got == out_size;
}

enum { KEEP, INFLATE, DROP };

static bool dropped(const char *name) {
  return !strcmp(name, ".debug_loclists") || !strcmp(name, ".debug_loc");
}

/* The file is untrusted (a .gnu_debuglink can name any file beside a binary): what its
 * compression headers claim is checked before any of it is believed. An alignment is a power of
 * two up to 64 KiB; a section inflates to at most what zlib can make of its compressed bytes
 * (deflate's best ratio is 1032:1); the new file's size must not wrap. */
#define MAX_ALIGNMENT 65536u
#define MAX_RATIO 1032u
/* Pages made at once for the inflated sections, at most (libc's: 10 MB); beyond, they are made as
 * they are written, so a file that claims more than it holds costs no more than it holds. */
#define POPULATE_MAX (64u << 20)

static bool align_up(uint64_t *offset, uint64_t alignment) {
  if (alignment <= 1)
    return true;
  uint64_t end;
  if (__builtin_add_overflow(*offset, alignment - 1, &end))
    return false;
  *offset = end & ~(alignment - 1);
  return true;
}

static bool plausible(const Elf64_Chdr *chdr, uint64_t compressed) {
  uint64_t align = chdr->ch_addralign;
  return (align & (align - 1)) == 0 && align <= MAX_ALIGNMENT &&
         chdr->ch_size <= compressed * MAX_RATIO + 64;
}

/* The new section headers and what to do with each section; false when there is nothing to
 * inflate or the file is not one this handles (only 64-bit, host-order ELF). */
static bool plan(Elf *elf, const struct stat *st, Elf64_Shdr *out, unsigned char *action,
                 size_t count, uint64_t *shoff, uint64_t *total) {
  size_t strndx;
  if (elf_getshdrstrndx(elf, &strndx) != 0)
    return false;
  uint64_t end = (uint64_t)st->st_size;
  bool any = false;
  for (size_t i = 0; i < count; i++) {
    Elf_Scn *scn = elf_getscn(elf, i);
    Elf64_Shdr *shdr = scn ? elf64_getshdr(scn) : NULL;
    if (!shdr)
      return false;
    out[i] = *shdr;
    action[i] = KEEP;
    const char *name = elf_strptr(elf, strndx, shdr->sh_name);
    if (!(shdr->sh_flags & SHF_COMPRESSED) || shdr->sh_type == SHT_NOBITS || !name ||
        strncmp(name, ".debug_", 7) != 0 || shdr->sh_size < sizeof(Elf64_Chdr))
      continue;
    Elf_Data *raw = elf_rawdata(scn, NULL);
    Elf64_Chdr chdr;
    if (!raw || raw->d_size < sizeof chdr)
      return false;
    memcpy(&chdr, raw->d_buf, sizeof chdr);
    if (chdr.ch_type != ELFCOMPRESS_ZLIB)
      continue; /* left to libdw, as before */
    if (!plausible(&chdr, raw->d_size - sizeof chdr))
      return false; /* libdw will find it broken too */
    any = true;
    out[i].sh_flags &= ~(uint64_t)SHF_COMPRESSED;
    out[i].sh_size = chdr.ch_size;
    out[i].sh_addralign = chdr.ch_addralign;
    if (dropped(name)) {
      action[i] = DROP;
      out[i].sh_type = SHT_NOBITS;
      continue;
    }
    action[i] = INFLATE;
    if (!align_up(&end, chdr.ch_addralign))
      return false;
    out[i].sh_offset = end;
    if (__builtin_add_overflow(end, chdr.ch_size, &end))
      return false;
  }
  if (!align_up(&end, 8) || __builtin_mul_overflow(count, sizeof(Elf64_Shdr), total) ||
      __builtin_add_overflow(end, *total, total) || *total > (uint64_t)SIZE_MAX ||
      *total > (uint64_t)INT64_MAX)
    return false;
  *shoff = end;
  return any;
}

/* Writes the new file into `map`: the header, the program headers and every kept section at their
 * offsets, the inflated sections, the section header table. */
static bool fill(Elf *elf, const Elf64_Ehdr *ehdr, const Elf64_Shdr *shdrs,
                 const unsigned char *action, size_t count, uint64_t shoff, unsigned char *map,
                 uint64_t total) {
  Elf64_Ehdr header = *ehdr;
  header.e_shoff = shoff;
  memcpy(map, &header, sizeof header);
  if (ehdr->e_phnum) {
    Elf64_Phdr *phdrs = elf64_getphdr(elf);
    if (!phdrs || ehdr->e_phoff > total ||
        (uint64_t)ehdr->e_phnum * sizeof *phdrs > total - ehdr->e_phoff)
      return false;
    memcpy(map + ehdr->e_phoff, phdrs, (size_t)ehdr->e_phnum * sizeof *phdrs);
  }
  void *decompressor = NULL;
  bool ok = true;
  for (size_t i = 1; i < count && ok; i++) {
    if (action[i] == DROP || shdrs[i].sh_type == SHT_NOBITS || !shdrs[i].sh_size)
      continue;
    Elf_Data *raw = elf_rawdata(elf_getscn(elf, i), NULL);
    uint64_t end;
    if (!raw || !raw->d_buf || __builtin_add_overflow(shdrs[i].sh_offset, shdrs[i].sh_size, &end) ||
        end > shoff) {
      ok = false; /* every section lies before the section header table (plan) */
    } else if (action[i] == INFLATE) {
      ok = inflate_exact(&decompressor, (const char *)raw->d_buf + sizeof(Elf64_Chdr),
                         raw->d_size - sizeof(Elf64_Chdr), map + shdrs[i].sh_offset,
                         shdrs[i].sh_size);
    } else if (raw->d_size == shdrs[i].sh_size) {
      memcpy(map + shdrs[i].sh_offset, raw->d_buf, raw->d_size);
    } else {
      ok = false;
    }
  }
  if (decompressor)
    libdeflate.free(decompressor);
  memcpy(map + shoff, shdrs, count * sizeof *shdrs);
  return ok;
}

int rec_inflate_debug_file(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fd;
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  Elf64_Ehdr *ehdr = elf ? elf64_getehdr(elf) : NULL;
  size_t count = 0;
  int result = fd;
  /* Extended section numbering (e_shnum 0) is left to libdw. */
  if (!ehdr || ehdr->e_ident[EI_DATA] != ELFDATA2LSB || ehdr->e_shnum == 0 ||
      ehdr->e_shstrndx == SHN_XINDEX || elf_getshdrnum(elf, &count) != 0 || count < 2 ||
      ehdr->e_shentsize != sizeof(Elf64_Shdr) ||
      (ehdr->e_phnum && ehdr->e_phentsize != sizeof(Elf64_Phdr))) {
    elf_end(elf);
    return fd;
  }
  Elf64_Shdr *shdrs = malloc(count * sizeof *shdrs);
  unsigned char *action = malloc(count);
  uint64_t shoff = 0, total = 0;
  /* A copy larger than the file size limit (ulimit -f) would raise SIGXFSZ at its ftruncate, in
   * memtap or, tracing in process, in the program: libdw then inflates in memory as before. */
  if (shdrs && action && plan(elf, &st, shdrs, action, count, &shoff, &total) &&
      total <= mt_file_size_limit() &&
      (result = rec_debug_cache_open(&st, total, shdrs, count * sizeof *shdrs, shoff)) < 0) {
    result = fd;
    int copy = memfd_create("memtap-debuginfo", MFD_CLOEXEC);
    void *map = MAP_FAILED;
    if (copy >= 0 && ftruncate(copy, (off_t)total) == 0)
      map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, copy, 0);
#ifdef MADV_POPULATE_WRITE
    /* The inflated part in one call rather than a page fault per page (Linux 5.14; without it,
     * the faults happen as before). */
    uint64_t from = (uint64_t)st.st_size & ~(uint64_t)4095;
    if (map != MAP_FAILED && total > from && total - from <= POPULATE_MAX)
      madvise((char *)map + from, total - from, MADV_POPULATE_WRITE);
#endif
    bool ok = map != MAP_FAILED && fill(elf, ehdr, shdrs, action, count, shoff, map, total);
    if (map != MAP_FAILED)
      munmap(map, total);
    if (ok) {
      result = copy;
      rec_debug_cache_store(&st, copy, total);
    } else if (copy >= 0) {
      close(copy);
    }
  }
  free(shdrs);
  free(action);
  elf_end(elf);
  if (result != fd)
    close(fd);
  return result;
}
