/* /proc/PID/exe, read and cleaned, the effective uid in /proc/PID/status and /proc/PID/auxv's
 * fingerprint (process_program.h). */
#include "process_program.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/process_image.h"

void process_program_undeleted(char *path) {
  static const char deleted[] = " (deleted)";
  size_t len = strlen(path), tail = sizeof deleted - 1;
  if (len > tail && strcmp(path + len - tail, deleted) == 0)
    path[len - tail] = 0;
}

bool process_program(long pid, char *buf, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/%ld/exe", pid);
  ssize_t n = readlink(link, buf, size - 1);
  if (n <= 0 || (size_t)n == size - 1)
    return false;
  buf[n] = 0;
  process_program_undeleted(buf);
  return true;
}

long process_effective_uid(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  long real = -1, effective = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Uid: %ld %ld", &real, &effective) == 2)
      break;
  fclose(f);
  return effective;
}

uint64_t process_image(long pid) {
  char path[64];
  uint8_t auxv[4096];
  snprintf(path, sizeof path, "/proc/%ld/auxv", pid);
  return mt_process_image(path, auxv, sizeof auxv);
}
