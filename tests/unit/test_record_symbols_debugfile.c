/* Symbolisation through a separate debug file whose sections are zlib-compressed (as Debian's
 * libc6-dbg ships libc's): the same function, file, line and inlined frame as from the module's
 * own DWARF; and the inflated copy libdw is given instead (inflate.c): the same bytes as libelf's
 * own inflation, location lists left out, files without compressed sections untouched. Needs
 * objcopy (binutils); skipped without it. */
#include <elfutils/libdwelf.h>
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "record_helper.h"
#include "record_testlib.h"
#include "testutil.h"

#include "record/inflate.h"

static char dir[] = "/tmp/memtap-debugfile-XXXXXX";
static char exe[4096];

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* This test's executable split in two: `dir`/self without DWARF, with a .gnu_debuglink to
 * `dir`/self.debug, its DWARF compressed. */
static int setup(void **state) {
  (void)state;
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0 || !mkdtemp(dir))
    return -1;
  exe[len] = 0;
  char command[3 * 4096 + 200];
  snprintf(command, sizeof command,
           "objcopy --only-keep-debug --compress-debug-sections=zlib '%s' '%s/self.debug' && "
           "objcopy --strip-debug --add-gnu-debuglink='%s/self.debug' '%s' '%s/self'",
           exe, dir, dir, exe, dir);
  if (system(command) != 0)
    exe[0] = 0; /* no objcopy: every test skips but the last */
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char command[4096];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0)
    return -1;
  return 0;
}

static int first_module(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  *(uint64_t *)user = info->dlpi_addr;
  return 1;
}

static size_t build_id_of(const char *path, uint8_t *out, size_t cap) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  const void *id = NULL;
  ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
  assert_true(n > 0 && (size_t)n <= cap);
  memcpy(out, id, (size_t)n);
  elf_end(elf);
  close(fd);
  return (size_t)n;
}

static void compressed_debug_file_gives_function_file_line_and_inlined_frame(void **state) {
  (void)state;
  if (!exe[0])
    skip();
  int inner_line = 0, capture_line = 0;
  uint64_t pc = record_helper_outer(&inner_line, &capture_line);
  uint64_t bias = 0;
  dl_iterate_phdr(first_module, &bias);
  char stripped[4200];
  snprintf(stripped, sizeof stripped, "%s/self", dir);
  uint8_t id[64];
  size_t id_length = build_id_of(stripped, id, sizeof id);
  mt_ring *r = rr_open(true, 1);
  rr_module(r, 1, bias, pc - 0x100000, pc + 0x100000, stripped, id, id_length);
  rr_alloc(r, 0x1000, 8, &pc, 1);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "debugfile.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 1);
  size_t n;
  const mt_location *l = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 2);
  assert_string_equal(l[0].defname, "record_helper_outer");
  assert_true(ends_with(l[0].filename, "record_helper.c"));
  assert_int_equal(l[0].line, inner_line);
  assert_string_equal(l[1].defname, "record_helper_inner");
  assert_true(ends_with(l[1].filename, "record_helper.c"));
  assert_int_equal(l[1].line, capture_line);
  rr_trace_free(&t);
}

static Elf_Scn *section_named(Elf *elf, const char *name) {
  size_t strndx;
  assert_int_equal(elf_getshdrstrndx(elf, &strndx), 0);
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr shdr;
    gelf_getshdr(scn, &shdr);
    const char *s = elf_strptr(elf, strndx, shdr.sh_name);
    if (s && !strcmp(s, name))
      return scn;
  }
  return NULL;
}

static void inflated_copy_holds_the_sections_libelf_inflates(void **state) {
  (void)state;
  if (!exe[0])
    skip();
  char debug[4200];
  snprintf(debug, sizeof debug, "%s/self.debug", dir);
  int fd = open(debug, O_RDONLY);
  assert_true(fd >= 0);
  int copy = rec_inflate_debug_file(fd);
  assert_int_not_equal(copy, fd);
  int original = open(debug, O_RDONLY);
  elf_version(EV_CURRENT);
  Elf *a = elf_begin(original, ELF_C_READ, NULL), *b = elf_begin(copy, ELF_C_READ, NULL);
  assert_non_null(a);
  assert_non_null(b);
  size_t checked = 0;
  static const char *const names[] = {".debug_info", ".debug_abbrev",  ".debug_line",
                                      ".debug_str",  ".debug_aranges", ".debug_rnglists"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    Elf_Scn *x = section_named(a, names[i]), *y = section_named(b, names[i]);
    if (!x)
      continue;
    assert_non_null(y);
    GElf_Shdr sx, sy;
    gelf_getshdr(x, &sx);
    gelf_getshdr(y, &sy);
    if (!(sx.sh_flags & SHF_COMPRESSED))
      continue; /* objcopy leaves a section that does not shrink as it is */
    assert_false(sy.sh_flags & SHF_COMPRESSED);
    assert_int_equal(elf_compress(x, 0, 0), 1);
    Elf_Data *dx = elf_getdata(x, NULL), *dy = elf_getdata(y, NULL);
    assert_int_equal(dx->d_size, dy->d_size);
    assert_memory_equal(dx->d_buf, dy->d_buf, dx->d_size);
    checked++;
  }
  assert_true(checked >= 3);
  /* Location lists, compressed, are left out. */
  static const char *const lists[] = {".debug_loclists", ".debug_loc"};
  for (size_t i = 0; i < 2; i++) {
    Elf_Scn *x = section_named(a, lists[i]), *y = section_named(b, lists[i]);
    GElf_Shdr sx, sy;
    if (x && gelf_getshdr(x, &sx) && (sx.sh_flags & SHF_COMPRESSED)) {
      assert_non_null(y);
      gelf_getshdr(y, &sy);
      assert_int_equal(sy.sh_type, SHT_NOBITS);
    }
  }
  elf_end(a);
  elf_end(b);
  close(original);
  close(copy);
}

/* The whole content of `fd` (from offset 0); *size its length. */
static unsigned char *read_all(int fd, size_t *size) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  unsigned char *bytes = malloc((size_t)st.st_size + 1);
  assert_non_null(bytes);
  assert_int_equal(pread(fd, bytes, (size_t)st.st_size, 0), st.st_size);
  *size = (size_t)st.st_size;
  return bytes;
}

static int inflate_path(const char *path) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  return rec_inflate_debug_file(fd);
}

static void cached_copy_is_used_when_exactly_as_planned_and_rebuilt_otherwise(void **state) {
  (void)state;
  if (!exe[0])
    skip();
  char debug[4200], cache[4200];
  snprintf(debug, sizeof debug, "%s/self.debug", dir);
  snprintf(cache, sizeof cache, "%s/cache/memtap", tu_temp_dir());
  size_t fresh_size, size;
  int fresh = inflate_path(debug); /* no cache yet: none is written either */
  unsigned char *expected = read_all(fresh, &fresh_size);
  close(fresh);
  rec_debug_cache_use(cache);
  int first = inflate_path(debug); /* inflated, and kept */
  unsigned char *bytes = read_all(first, &size);
  assert_int_equal(size, fresh_size);
  assert_memory_equal(bytes, expected, size);
  free(bytes);
  close(first);
  char entry[4600] = "";
  DIR *d = opendir(cache);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, ".debug"))
      snprintf(entry, sizeof entry, "%s/%s", cache, e->d_name);
  closedir(d);
  assert_true(entry[0]);
  struct stat kept;
  assert_int_equal(stat(entry, &kept), 0);
  assert_int_equal(kept.st_mode & 0777, 0600);

  int second = inflate_path(debug); /* the cached file itself, same bytes */
  struct stat st;
  assert_int_equal(fstat(second, &st), 0);
  assert_true(st.st_ino == kept.st_ino && st.st_dev == kept.st_dev);
  bytes = read_all(second, &size);
  assert_int_equal(size, fresh_size);
  assert_memory_equal(bytes, expected, size);
  free(bytes);
  close(second);

  /* A damaged entry (its section header table, or its size) is not used, and is replaced. */
  const Elf64_Ehdr *header = (const Elf64_Ehdr *)expected;
  int w = open(entry, O_WRONLY);
  assert_true(w >= 0);
  assert_int_equal(pwrite(w, "\xff\xff\xff\xff", 4, (off_t)header->e_shoff + 64 + 4), 4);
  close(w);
  int third = inflate_path(debug);
  assert_int_equal(fstat(third, &st), 0);
  assert_false(st.st_ino == kept.st_ino && st.st_dev == kept.st_dev);
  bytes = read_all(third, &size);
  assert_memory_equal(bytes, expected, size);
  free(bytes);
  close(third);
  assert_int_equal(truncate(entry, 4096), 0);
  int fourth = inflate_path(debug);
  bytes = read_all(fourth, &size);
  assert_int_equal(size, fresh_size);
  assert_memory_equal(bytes, expected, size);
  free(bytes);
  close(fourth);
  assert_int_equal(stat(entry, &kept), 0);
  assert_int_equal((size_t)kept.st_size, fresh_size); /* rebuilt */
  rec_debug_cache_use(NULL);
  free(expected);
}

static void file_without_compressed_sections_is_handed_back(void **state) {
  (void)state;
  int fd = open(exe[0] ? exe : "/proc/self/exe", O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(rec_inflate_debug_file(fd), fd);
  close(fd);
}

/* A small ELF64 file with .shstrtab and two zlib-compressed .debug_ sections whose compression
 * headers claim (size, alignment) each; their streams hold 4 KiB and 16 bytes. */
static int crafted_debug_file(const char *name, uint64_t size_a, uint64_t align_a,
                              uint64_t size_b) {
  static const char shstr[] = "\0.shstrtab\0.debug_info\0.debug_str";
  static unsigned char plain[4096];
  memset(plain, 0xaa, sizeof plain);
  unsigned char zipped_a[8192], zipped_b[256];
  uLongf len_a = sizeof zipped_a, len_b = sizeof zipped_b;
  assert_int_equal(compress(zipped_a, &len_a, plain, sizeof plain), Z_OK);
  assert_int_equal(compress(zipped_b, &len_b, plain, 16), Z_OK);
  static unsigned char file[16384];
  memset(file, 0, sizeof file);
  size_t at = sizeof(Elf64_Ehdr);
  size_t o_str = at;
  memcpy(file + at, shstr, sizeof shstr);
  at += sizeof shstr;
  Elf64_Chdr ca = {.ch_type = ELFCOMPRESS_ZLIB, .ch_size = size_a, .ch_addralign = align_a};
  Elf64_Chdr cb = {.ch_type = ELFCOMPRESS_ZLIB, .ch_size = size_b, .ch_addralign = 1};
  size_t o_a = at;
  memcpy(file + at, &ca, sizeof ca);
  memcpy(file + at + sizeof ca, zipped_a, len_a);
  at += sizeof ca + len_a;
  size_t o_b = at;
  memcpy(file + at, &cb, sizeof cb);
  memcpy(file + at + sizeof cb, zipped_b, len_b);
  at += sizeof cb + len_b;
  at = (at + 7) & ~(size_t)7;
  Elf64_Shdr sh[4] = {
      {0},
      {.sh_name = 1,
       .sh_type = SHT_STRTAB,
       .sh_offset = o_str,
       .sh_size = sizeof shstr,
       .sh_addralign = 1},
      {.sh_name = 11,
       .sh_type = SHT_PROGBITS,
       .sh_flags = SHF_COMPRESSED,
       .sh_offset = o_a,
       .sh_size = sizeof ca + len_a,
       .sh_addralign = 8},
      {.sh_name = 23,
       .sh_type = SHT_PROGBITS,
       .sh_flags = SHF_COMPRESSED,
       .sh_offset = o_b,
       .sh_size = sizeof cb + len_b,
       .sh_addralign = 8},
  };
  Elf64_Ehdr eh = {.e_type = ET_EXEC,
                   .e_machine = EM_X86_64,
                   .e_version = EV_CURRENT,
                   .e_shoff = at,
                   .e_ehsize = sizeof eh,
                   .e_shentsize = sizeof(Elf64_Shdr),
                   .e_shnum = 4,
                   .e_shstrndx = 1};
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  memcpy(file, &eh, sizeof eh);
  memcpy(file + at, sh, sizeof sh);
  at += sizeof sh;
  const char *path = tu_temp_path(name);
  tu_write_file(path, file, at);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  return fd;
}

/* A debug file is untrusted (a .gnu_debuglink may name one shipped beside any binary): claims its
 * bytes cannot hold are refused and the file goes to libdw as it is, instead of a copy sized, and
 * written, by the claims. The honest file of the same shape is inflated. */
static void claims_a_debug_file_cannot_hold_are_refused(void **state) {
  (void)state;
  int fd = crafted_debug_file("honest.debug", 4096, 1, 16);
  int copy = rec_inflate_debug_file(fd);
  assert_int_not_equal(copy, fd); /* inflated: the crafted files below are well-formed otherwise */
  close(copy);
  const struct {
    uint64_t size_a, align_a, size_b;
  } bad[] = {
      {UINT64_C(1) << 63, 1, UINT64_MAX - (UINT64_C(1) << 63)}, /* the end wraps round */
      {64u << 20, 1, 16},                                       /* more than 4 KiB can inflate to */
      {4096, 3, 16},                                            /* not a power of two */
      {4096, UINT64_C(1) << 40, 16},                            /* an alignment past any page */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    fd = crafted_debug_file("crafted.debug", bad[i].size_a, bad[i].align_a, bad[i].size_b);
    if (rec_inflate_debug_file(fd) != fd)
      fail_msg("crafted file %zu was inflated", i);
    close(fd);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(compressed_debug_file_gives_function_file_line_and_inlined_frame),
      cmocka_unit_test(inflated_copy_holds_the_sections_libelf_inflates),
      cmocka_unit_test(cached_copy_is_used_when_exactly_as_planned_and_rebuilt_otherwise),
      cmocka_unit_test(file_without_compressed_sections_is_handed_back),
      cmocka_unit_test(claims_a_debug_file_cannot_hold_are_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
