/* Runs a libFuzzer target without libFuzzer: calls LLVMFuzzerTestOneInput on every file named on
 * the command line, or found directly inside a directory named there. Used by CTest to replay the
 * committed corpora (under the sanitizer build in CI) so that every past finding stays fixed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
  if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "%s: read failed\n", path);
    fclose(f);
    free(data);
    return 1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(data, (size_t)size);
  free(data);
  return 0;
}

int main(int argc, char **argv) {
  unsigned long inputs = 0;
  int failures = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      failures++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      failures += run_file(argv[i]);
      inputs++;
      continue;
    }
    DIR *dir = opendir(argv[i]);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        failures += run_file(path);
        inputs++;
      }
    }
    if (dir)
      closedir(dir);
  }
  printf("replayed %lu inputs, %d unreadable\n", inputs, failures);
  return failures || inputs == 0 ? 1 : 0;
}
