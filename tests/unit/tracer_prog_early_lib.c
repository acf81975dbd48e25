/* A library whose constructor runs before the preload shim's and races threads into the shim's
 * first use (test_tracer_preload.c, early_allocations_from_racing_threads_are_recorded): linked
 * into tracer_prog_early, it is initialised before the objects loaded after it. */
#include <pthread.h>
#include <stdlib.h>

int tracer_prog_early_done;

static void *churn(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    void *volatile p = malloc(2345);
    free(p);
  }
  return NULL;
}

__attribute__((constructor)) static void race_at_load(void) {
  pthread_t t[4];
  int started = 0;
  for (int i = 0; i < 4; i++)
    started += pthread_create(&t[i], NULL, churn, NULL) == 0;
  for (int i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  tracer_prog_early_done = started;
}
