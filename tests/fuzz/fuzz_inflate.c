/* libFuzzer target for the inflation of separate debug files (src/record/inflate.c), which reads
 * whatever file a module's build-id or .gnu_debuglink leads to: the input is such a file, in a
 * memfd, given to rec_inflate_debug_file.
 *
 * It must not crash, read or write out of bounds (sanitizers), or make a copy larger than the
 * compressed bytes can inflate to; when it makes a copy, the input's descriptor is closed and the
 * copy is an ELF file libelf opens with no compressed .debug_ section left. */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record/inflate.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz-debug", MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(write(fd, data, size) == (ssize_t)size);
  int copy = rec_inflate_debug_file(fd);
  if (copy == fd) {
    CHECK(fcntl(fd, F_GETFD) >= 0); /* still the caller's */
    close(fd);
    return 0;
  }
  CHECK(copy >= 0);
  CHECK(fcntl(fd, F_GETFD) < 0); /* closed: the copy replaces it */
  struct stat st;
  CHECK(fstat(copy, &st) == 0);
  /* Deflate inflates at most 1032:1; headers and alignment add a little. */
  CHECK((uint64_t)st.st_size <= (uint64_t)size * 1033 + (1u << 20));
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(copy, ELF_C_READ, NULL);
  CHECK(elf != NULL);
  size_t strndx;
  if (elf_getshdrstrndx(elf, &strndx) == 0)
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
      GElf_Shdr shdr;
      const char *name;
      if (gelf_getshdr(scn, &shdr) && (name = elf_strptr(elf, strndx, shdr.sh_name)) &&
          !strncmp(name, ".debug_", 7) && shdr.sh_type != SHT_NOBITS) {
        /* zlib sections were inflated; other kinds (zstd) are libdw's, as before */
        if (shdr.sh_flags & SHF_COMPRESSED) {
          Elf_Data *raw = elf_rawdata(scn, NULL);
          if (raw && raw->d_size >= sizeof(Elf64_Chdr))
            CHECK(((const Elf64_Chdr *)raw->d_buf)->ch_type != ELFCOMPRESS_ZLIB);
        } else {
          (void)elf_getdata(scn, NULL); /* in bounds: the sanitizers watch */
        }
      }
    }
  elf_end(elf);
  close(copy);
  return 0;
}
