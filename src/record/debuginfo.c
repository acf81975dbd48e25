/* A module's separate debug information, found without the network (docs/record.md,
 * "Symbolisation"): the file libdwfl's build-id search finds under /usr/lib/debug/.build-id, else
 * the file .gnu_debuglink names, beside the module, in its .debug/ folder or under /usr/lib/debug,
 * when its CRC matches. libdwfl's standard search ends by asking debuginfod servers, and merely
 * asking starts libcurl and OpenSSL (debuginfod_begin initialises them whether or not
 * $DEBUGINFOD_URLS is set): downloads the user did not ask for, and libraries whose exit handlers
 * tear them down under a consumer thread still symbolising (in-process mode finishes its trace
 * after those handlers ran). So the standard search is used only when the user asks for it. */
#include "record/debuginfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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
  int fd = open(path, O_RDONLY | O_CLOEXEC);
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

static int find_debuginfo_locally(Dwfl_Module *mod, void **userdata, const char *modname,
                                  Dwarf_Addr base, const char *file_name,
                                  const char *debuglink_file, GElf_Word debuglink_crc,
                                  char **debuginfo_file_name) {
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd >= 0)
    return fd;
  return find_by_debuglink(file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks local_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo_locally,
    .section_address = dwfl_offline_section_address,
};

static const Dwfl_Callbacks debuginfod_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

const Dwfl_Callbacks *rec_debuginfo_callbacks(bool debuginfod) {
  return debuginfod ? &debuginfod_callbacks : &local_callbacks;
}
