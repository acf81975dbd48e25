/* dlopen_main: loads a library that allocates (argv[1]), calls it, frees what it returned,
 * unloads it, and does it all twice: the second load may land at the first one's address, and
 * its code must still resolve to the library's lines. `dlopen_main LIBRARY deep` opens it with
 * RTLD_DEEPBIND, `deep-lazy` with RTLD_DEEPBIND | RTLD_LAZY (its own dependencies first: libc's
 * malloc and free, past an interposer in the global scope). `dlopen_main deep-threads LIBRARY...`
 * runs 4 threads that open, call and close the libraries in turn 2,000 times each, two of the
 * threads with RTLD_DEEPBIND: the tracer rebinds deep-bound libraries while other threads load
 * and unload others. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_program.h"

static char **libraries;
static int library_count;

static void *open_and_close(void *arg) {
  long k = (long)arg;
  for (int i = 0; i < 2000; i++) {
    const char *name = libraries[(i + k) % library_count];
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | (k & 1 ? RTLD_DEEPBIND : 0));
    if (lib == NULL) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      exit(1);
    }
    void *(*dl_alloc)(size_t) = (void *(*)(size_t))dlsym(lib, "dl_alloc");
    free(dl_alloc(10));
    dlclose(lib);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "deep-threads")) {
    libraries = argv + 2;
    library_count = argc - 2;
    pthread_t threads[4];
    for (long k = 0; k < 4; k++)
      pthread_create(&threads[k], NULL, open_and_close, (void *)k);
    for (int k = 0; k < 4; k++)
      pthread_join(threads[k], NULL);
    printf("threads done\n");
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: dlopen_main LIBRARY [deep|deep-lazy] | deep-threads LIBRARY...\n");
    return 64;
  }
  int flags = RTLD_NOW | RTLD_LOCAL;
  if (argc > 2 && !strcmp(argv[2], "deep"))
    flags |= RTLD_DEEPBIND;
  else if (argc > 2 && !strcmp(argv[2], "deep-lazy"))
    flags = RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND;
  for (int round = 0; round < 2; round++) {
    void *lib = dlopen(argv[1], flags);
    if (lib == NULL) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    void *(*dl_alloc)(size_t) = (void *(*)(size_t))dlsym(lib, "dl_alloc");
    void *blocks[10];
    for (int i = 0; i < 10; i++)
      blocks[i] = dl_alloc(160);
    for (int i = 0; i < 10; i++)
      free(blocks[i]);
    void *mine = malloc(168); // @expect allocs=2 frees=2 words=42
    KEEP(mine);
    free(mine);
    printf("round %d: dlclose %d\n", round, dlclose(lib));
  }
  printf("dlopen done\n");
  return 0;
}
