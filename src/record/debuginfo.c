/* A module's separate debug information, found without the network (docs/record.md,
 * "Symbolisation"): the file libdwfl's build-id search finds under /usr/lib/debug/.build-id, else
 * the file .gnu_debuglink names, beside the module, in its .debug/ folder or under /usr/lib/debug,
 * when its CRC matches. libdwfl's standard search ends by asking debuginfod servers, and merely
 * asking starts libcurl and OpenSSL (debuginfod_begin initialises them whether or not
 * $DEBUGINFOD_URLS is set): downloads the user did not ask for, and libraries whose exit handlers
 * tear them down under a consumer thread still symbolising (in-process mode finishes its trace
 * after those handlers ran). So the standard search is used only when the user asks for it. Either
 * way a file found with compressed debug sections is handed to libdw inflated (inflate.c). */
#include "record/debuginfo.h"
#include "record/inflate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <elfutils/libdwelf.h>

/* The CRC-32 (zlib's, as .gnu_debuglink uses) of the file open at `fd`; false on a read error. */
static bool file_crc(int fd, uint32_t *crc) {
  enum { CHUNK = 1 << 16 };
  unsigned char *buffer = malloc(CHUNK);
  if (!buffer)
    return false;
  uLong sum = crc32(0, Z_NULL, 0);
  ssize_t n;
  while ((n = read(fd, buffer, CHUNK)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    sum = crc32(sum, buffer, (uInt)n);
  }
  free(buffer);
  *crc = (uint32_t)sum;
  return n == 0;
}

/* Opens `path` if it is a regular file other than the module itself with the CRC `crc`. */
static int open_if_matching(const char *path, const struct stat *module, uint32_t crc) {
  /* O_NONBLOCK: the folder is the traced process's module's, and a FIFO there would block the
   * open; a regular file reads the same with it. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  struct stat st;
  uint32_t sum;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (module && st.st_dev == module->st_dev && st.st_ino == module->st_ino) ||
      !file_crc(fd, &sum) || sum != crc || lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The .gnu_debuglink file `link` of the module at `file`: in the module's folder, its .debug/
 * folder, then the same folder under /usr/lib/debug (gdb's and libdwfl's order). */
static int find_by_debuglink(const char *file, const char *link, uint32_t crc, char **found) {
  if (!file || file[0] != '/' || !link || !link[0] || strchr(link, '/'))
    return -1;
  struct stat module;
  bool have_module = stat(file, &module) == 0;
  const char *slash = strrchr(file, '/');
  int dir_length = (int)(slash - file);
  static const char *const patterns[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
  char path[4096];
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    int n = snprintf(path, sizeof path, patterns[i], dir_length, file, link);
    if (n <= 0 || (size_t)n >= sizeof path)
      continue;
    int fd = open_if_matching(path, have_module ? &module : NULL, crc);
    if (fd >= 0) {
      *found = strdup(path);
      return fd;
    }
  }
  return -1;
}

/* The module's debug file under /usr/lib/debug/.build-id, if its own build-id note matches. */
static int find_by_build_id(Dwfl_Module *mod, char **found) {
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = dwfl_module_build_id(mod, &bits, &vaddr);
  if (n < 2)
    return -1;
  char path[64 + 2 * 256];
  int length = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
  for (int i = 1; i < n && (size_t)length + 8 < sizeof path; i++)
    length += snprintf(path + length, sizeof path - (size_t)length, "%02x", bits[i]);
  snprintf(path + length, sizeof path - (size_t)length, ".debug");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  const void *id = NULL;
  bool match = elf && dwelf_elf_gnu_build_id(elf, &id) == n && !memcmp(id, bits, (size_t)n);
  elf_end(elf);
  if (!match || !(*found = strdup(path))) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Whether libdwfl asks for the module's own debug file rather than for the dwz alternate file of
 * its DWARF, which it looks for with the same callback once that DWARF is open. */
static bool own_file_wanted(Dwfl_Module *mod) {
  Dwarf_Addr dwbias = 0;
  dwfl_module_info(mod, NULL, NULL, NULL, &dwbias, NULL, NULL, NULL);
  return dwbias == (Dwarf_Addr)-1;
}

/* The module's own debug file found on this machine, handed over inflated. Not through
 * dwfl_build_id_find_debuginfo: it opens its own handle on the file it finds and gives that to the
 * module, whatever descriptor the callback returns. */
static int find_own_debug_file(Dwfl_Module *mod, const char *file_name, const char *debuglink_file,
                               GElf_Word debuglink_crc, char **debuginfo_file_name) {
  int fd = find_by_build_id(mod, debuginfo_file_name);
  if (fd < 0)
    fd = find_by_debuglink(file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
  return fd >= 0 ? rec_inflate_debug_file(fd) : -1;
}

static int find_debuginfo_locally(Dwfl_Module *mod, void **userdata, const char *modname,
                                  Dwarf_Addr base, const char *file_name,
                                  const char *debuglink_file, GElf_Word debuglink_crc,
                                  char **debuginfo_file_name) {
  if (own_file_wanted(mod))
    return find_own_debug_file(mod, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd < 0)
    fd = find_by_debuglink(file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
  return fd;
}

static int find_debuginfo_anywhere(Dwfl_Module *mod, void **userdata, const char *modname,
                                   Dwarf_Addr base, const char *file_name,
                                   const char *debuglink_file, GElf_Word debuglink_crc,
                                   char **debuginfo_file_name) {
  int fd = -1;
  if (own_file_wanted(mod))
    fd = find_own_debug_file(mod, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
  if (fd < 0) /* the same local search again, then the debuginfod servers */
    fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
  return fd;
}

static const Dwfl_Callbacks local_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo_locally,
    .section_address = dwfl_offline_section_address,
};

static const Dwfl_Callbacks debuginfod_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo_anywhere,
    .section_address = dwfl_offline_section_address,
};

const Dwfl_Callbacks *rec_debuginfo_callbacks(bool debuginfod) {
  return debuginfod ? &debuginfod_callbacks : &local_callbacks;
}
