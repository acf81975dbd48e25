/* Tracer benchmark workload: malloc+free churn of mixed small sizes (16..255 bytes) over a table of
 * live blocks, on 1 or more threads. Each step frees a random slot's block and allocates a new one
 * in its place, so blocks live for a varying number of steps. Usage: churn [SCALE] [THREADS];
 * the total number of malloc+free pairs (SCALE x 30 M) is split evenly between the threads. */
#include <pthread.h>
#include <string.h>

#include "workload.h"

#define SLOTS 1024u

typedef struct churn_job {
  uint64_t steps, seed, checksum;
} churn_job;

static void *churn(void *arg) {
  churn_job *job = arg;
  void *slot[SLOTS];
  memset(slot, 0, sizeof slot);
  uint64_t rng = job->seed, sum = 0;
  for (uint64_t i = 0; i < job->steps; i++) {
    uint64_t r = workload_next(&rng);
    unsigned k = (unsigned)(r % SLOTS);
    size_t size = 16 + (size_t)((r >> 32) % 240);
    free(slot[k]);
    unsigned char *p = malloc(size);
    if (!p)
      abort();
    p[0] = (unsigned char)i; /* touched, so the pair cannot be optimised away */
    sum += (uintptr_t)p & 0xff0;
    slot[k] = p;
  }
  for (unsigned k = 0; k < SLOTS; k++)
    free(slot[k]);
  job->checksum = sum;
  return NULL;
}

int main(int argc, char **argv) {
  double scale = workload_scale(argc, argv);
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1 || threads > 64) {
    fprintf(stderr, "churn: THREADS must be 1..64\n");
    return 64;
  }
  uint64_t total = (uint64_t)(scale * 30e6);
  churn_job jobs[64];
  pthread_t tid[64];
  for (int t = 0; t < threads; t++) {
    jobs[t] = (churn_job){.steps = total / (uint64_t)threads,
                          .seed = 0x9E3779B97F4A7C15ULL + (uint64_t)t};
    if (t > 0 && pthread_create(&tid[t], NULL, churn, &jobs[t]) != 0) {
      fprintf(stderr, "churn: pthread_create failed\n");
      return 1;
    }
  }
  churn(&jobs[0]);
  for (int t = 1; t < threads; t++)
    pthread_join(tid[t], NULL);
  /* Addresses differ between allocators, so only the step count is printed as the output. */
  printf("churn: %llu pairs on %d thread(s)\n",
         (unsigned long long)(total / (uint64_t)threads * (uint64_t)threads), threads);
  return jobs[0].checksum == 1 ? 2 : 0;
}
