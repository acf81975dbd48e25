/* libFuzzer target for what `memtap record` reads of a program file before starting it
 * (src/record/program.c): the input is the file, in a memfd, given to mt_record_check_program,
 * mt_record_program_needs and mt_record_program_go_advice by its /proc/self/fd path.
 *
 * They must not crash or read out of bounds (sanitizers) whatever the ELF headers, section
 * headers, string tables, dynamic section or #! line claim; a refusal carries a message, and what
 * a program needs is a NUL-terminated name that fits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtap/record.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz-program", MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(write(fd, data, size) == (ssize_t)size);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  mt_error err;
  memset(&err, 0, sizeof err);
  int rc = mt_record_check_program(path, &err);
  CHECK(rc == MT_OK || rc == MT_E_UNSUPPORTED || rc == MT_E_IO);
  CHECK(rc == MT_OK || (err.message[0] && memchr(err.message, 0, sizeof err.message)));
  /* A small buffer too: a name that does not fit is not a name. */
  size_t sizes[] = {4096, 8};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char out[4096];
    memset(out, 'x', sizeof out);
    const char *what = mt_record_program_needs(path, out, sizes[i]);
    if (what)
      CHECK(memchr(out, 0, sizes[i]) != NULL);
  }
  const char *advice = mt_record_program_go_advice(path);
  CHECK(!advice || strstr(advice, "GODEBUG"));
  close(fd);
  return 0;
}
