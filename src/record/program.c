/* Programs the tracer cannot enter (docs/record.md, "Refusals"), and Go programs, whose Go heap it
 * cannot see, found by reading the file before it is started: the ELF header, program headers
 * (PT_INTERP), section names, the dynamic section's DT_NEEDED names and the symbol tables, each
 * read bounded by the file's real size, and a script's #! line. Files are opened without blocking
 * (a FIFO named by a #! line). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/error.h"
#include "memtap/record.h"

typedef struct image {
  const uint8_t *data;
  size_t size;
} image;

static const void *at(const image *im, uint64_t offset, uint64_t length) {
  if (offset > im->size || length > im->size - offset)
    return NULL;
  return im->data + offset;
}

/* A table of ELF structures (headers, dynamic entries, symbols) at `offset`: inside the file, and
 * at an offset their 8-byte alignment allows (the mapping is page-aligned), as every linker
 * writes them; NULL otherwise. */
static const void *table_at(const image *im, uint64_t offset, uint64_t length) {
  return offset % 8 ? NULL : at(im, offset, length);
}

static bool is_sanitizer_library(const char *name) {
  static const char *const runtimes[] = {"libasan.so",      "libtsan.so",       "libmsan.so",
                                         "liblsan.so",      "libclang_rt.asan", "libclang_rt.tsan",
                                         "libclang_rt.msan"};
  for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; i++)
    if (!strncmp(name, runtimes[i], strlen(runtimes[i])))
      return true;
  return false;
}

static bool is_sanitizer_symbol(const char *name) {
  return !strcmp(name, "__asan_init") || !strcmp(name, "__tsan_init") ||
         !strcmp(name, "__msan_init") || !strcmp(name, "__lsan_init");
}

/* A NUL-terminated string at `offset` of section `strtab`, or NULL. */
static const char *string_at(const image *im, const Elf64_Shdr *strtab, uint64_t offset) {
  /* The whole table inside the file first: memchr must not look past it. */
  const char *table = at(im, strtab->sh_offset, strtab->sh_size);
  if (!table || offset >= strtab->sh_size)
    return NULL;
  return memchr(table + offset, 0, strtab->sh_size - offset) ? table + offset : NULL;
}

/* Looks for sanitizer runtimes in DT_NEEDED and sanitizer entry points in the symbol tables. */
static const char *sanitizer_in(const image *im, const Elf64_Ehdr *eh) {
  if (eh->e_shentsize != sizeof(Elf64_Shdr))
    return NULL;
  const Elf64_Shdr *sh = table_at(im, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof *sh);
  if (!sh)
    return NULL;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    const Elf64_Shdr *s = &sh[i];
    if (s->sh_link >= eh->e_shnum)
      continue;
    const Elf64_Shdr *strtab = &sh[s->sh_link];
    if (s->sh_type == SHT_DYNAMIC) {
      const Elf64_Dyn *d = table_at(im, s->sh_offset, s->sh_size);
      for (size_t k = 0; d && k < s->sh_size / sizeof *d && d[k].d_tag != DT_NULL; k++) {
        const char *name = d[k].d_tag == DT_NEEDED ? string_at(im, strtab, d[k].d_un.d_val) : NULL;
        if (name && is_sanitizer_library(name))
          return name;
      }
    } else if (s->sh_type == SHT_SYMTAB || s->sh_type == SHT_DYNSYM) {
      const Elf64_Sym *sym = table_at(im, s->sh_offset, s->sh_size);
      for (size_t k = 0; sym && k < s->sh_size / sizeof *sym; k++) {
        if (sym[k].st_shndx == SHN_UNDEF)
          continue;
        const char *name = string_at(im, strtab, sym[k].st_name);
        if (name && is_sanitizer_symbol(name))
          return name;
      }
    }
  }
  return NULL;
}

/* Whether the ELF file is a Go program: Go's linker writes a .note.go.buildid section and, from Go
 * 1.13 on, .go.buildinfo (internal or external linking, -s -w too). Section headers only: a file
 * stripped of them is not recognised. */
static bool go_program(const image *im, const Elf64_Ehdr *eh) {
  if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum)
    return false;
  const Elf64_Shdr *sh = table_at(im, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof *sh);
  if (!sh)
    return false;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    const char *name = string_at(im, &sh[eh->e_shstrndx], sh[i].sh_name);
    if (name && (!strcmp(name, ".go.buildinfo") || !strcmp(name, ".note.go.buildid")))
      return true;
  }
  return false;
}

/* Where a Go program's own heap is traced instead (docs/go.md). */
#define GO_HEAP_ADVICE                                                                             \
  "Go's own heap never calls malloc: run it with GODEBUG=traceallocfree=1 writing an execution "   \
  "trace (Go 1.23+), which memtap reads (docs/go.md)"

static int check_elf(const char *path, const image *im, mt_error *err) {
  const Elf64_Ehdr *eh = at(im, 0, sizeof *eh);
  if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG))
    return MT_OK;
  if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64)
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "not an x86-64 program: the tracer cannot be loaded into it");
  if (eh->e_phentsize != sizeof(Elf64_Phdr))
    return mt_fail(err, MT_E_UNSUPPORTED, -1, "malformed ELF program headers");
  const Elf64_Phdr *ph = table_at(im, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof *ph);
  if (!ph)
    return mt_fail(err, MT_E_UNSUPPORTED, -1, "malformed ELF program headers");
  bool interp = false;
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_INTERP)
      interp = true;
  if (!interp && go_program(im, eh))
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "a statically linked Go program (no PT_INTERP): LD_PRELOAD cannot load the "
                   "tracer, and " GO_HEAP_ADVICE);
  if (!interp)
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "statically linked (no PT_INTERP): no dynamic loader runs to load the tracer "
                   "through LD_PRELOAD");
  const char *sanitizer = sanitizer_in(im, eh);
  if (sanitizer)
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "a sanitizer build (%s): the sanitizer's runtime owns malloc, so the tracer "
                   "cannot interpose it",
                   sanitizer);
  (void)path;
  return MT_OK;
}

/* Whether exec'ing the file changes the process's effective user or group, which is when the
 * kernel starts it in secure mode (AT_SECURE): a set-user-ID bit of a file owned by someone other
 * than the real user (a set-user-ID-root program run by root is not), the same for set-group-ID,
 * and neither on a file system mounted nosuid, where the bits are ignored. */
static bool changes_ids(int fd, const struct stat *st) {
  bool uid = (st->st_mode & S_ISUID) && st->st_uid != getuid();
  bool gid = (st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP) && st->st_gid != getgid();
  if (!uid && !gid)
    return false;
  struct statvfs fs;
  return fstatvfs(fd, &fs) != 0 || !(fs.f_flag & ST_NOSUID);
}

/* The interpreter a script's #! line names, into `out`; false when `im` is no script. */
static bool script_interpreter(const image *im, char *out, size_t size) {
  if (im->size < 2 || im->data[0] != '#' || im->data[1] != '!')
    return false;
  size_t i = 2, n = 0;
  while (i < im->size && (im->data[i] == ' ' || im->data[i] == '\t'))
    i++;
  while (i < im->size && n < size - 1 && im->data[i] != ' ' && im->data[i] != '\t' &&
         im->data[i] != '\n')
    out[n++] = (char)im->data[i++];
  out[n] = 0;
  return true;
}

/* The dynamic loader an ELF file names (PT_INTERP), into `out`; false without one. */
static bool elf_loader(const image *im, char *out, size_t size) {
  const Elf64_Ehdr *eh = at(im, 0, sizeof *eh);
  if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_phentsize != sizeof(Elf64_Phdr))
    return false;
  const Elf64_Phdr *ph = table_at(im, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof *ph);
  for (unsigned i = 0; ph && i < eh->e_phnum; i++) {
    const char *name = ph[i].p_type == PT_INTERP ? at(im, ph[i].p_offset, ph[i].p_filesz) : NULL;
    if (name && ph[i].p_filesz && ph[i].p_filesz < size) {
      memcpy(out, name, ph[i].p_filesz);
      out[ph[i].p_filesz] = 0;
      return out[0] != 0;
    }
  }
  return false;
}

/* Maps the regular file at `path` (opened without blocking) of at least `min_size` bytes into
 * *im; false for anything else. image_unmap gives it back. */
static bool image_map(const char *path, size_t min_size, image *im) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)min_size) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return false;
  *im = (image){map, (size_t)st.st_size};
  return true;
}

static void image_unmap(const image *im) {
  munmap((void *)im->data, im->size);
}

const char *mt_record_program_needs(const char *path, char *out, size_t size) {
  image im;
  if (!size || !image_map(path, 4, &im))
    return NULL;
  const char *what =
      script_interpreter(&im, out, size) ? (out[0] ? "the interpreter its #! line names" : NULL)
      : elf_loader(&im, out, size)       ? "the dynamic loader its ELF header names (PT_INTERP)"
                                         : NULL;
  image_unmap(&im);
  return what;
}

static int check(const char *path, int depth, mt_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return mt_fail_io(err, "opening the program");
  struct stat st;
  if (fstat(fd, &st)) {
    close(fd);
    return mt_fail_io(err, "reading the program");
  }
  if (changes_ids(fd, &st)) {
    close(fd);
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "set-user-ID or set-group-ID to another owner: the loader runs it in secure "
                   "mode and ignores LD_PRELOAD, so the tracer cannot be loaded");
  }
  if (fgetxattr(fd, "security.capability", NULL, 0) > 0) {
    close(fd);
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "has file capabilities (security.capability): the loader runs it in secure "
                   "mode and ignores LD_PRELOAD, so the tracer cannot be loaded");
  }
  if (!S_ISREG(st.st_mode) || st.st_size < 4) {
    close(fd);
    return MT_OK;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return mt_fail_io(err, "reading the program");
  image im = {map, (size_t)st.st_size};
  int rc = MT_OK;
  char interp[4096];
  if (script_interpreter(&im, interp, sizeof interp) && depth < 4) {
    /* A script: the interpreter is what gets loaded. */
    size_t n = strlen(interp);
    munmap(map, (size_t)st.st_size);
    if (n && interp[0] == '/') {
      rc = check(interp, depth + 1, err);
      if (rc == MT_E_IO)
        rc = MT_OK; /* exec will say what is wrong with the interpreter */
    }
    return rc;
  }
  rc = check_elf(path, &im, err);
  munmap(map, (size_t)st.st_size);
  return rc;
}

int mt_record_check_program(const char *path, mt_error *err) {
  return check(path, 0, err);
}

const char *mt_record_program_go_advice(const char *path) {
  image im;
  if (!image_map(path, sizeof(Elf64_Ehdr), &im))
    return NULL;
  const Elf64_Ehdr *eh = at(&im, 0, sizeof *eh);
  bool go = !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            go_program(&im, eh);
  image_unmap(&im);
  return go ? GO_HEAP_ADVICE : NULL;
}
