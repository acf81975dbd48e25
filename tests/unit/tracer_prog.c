/* A small program the preload tests run under libmemtap-preload.so (test_tracer_preload.c): each
 * mode makes allocations of distinctive sizes, so that the test can find them among the records,
 * and prints what it did. Its output must be the same with and without the shim. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* The allocation site the test looks for in frame 0. Never cloned: gcc -O3 made a
 * site.constprop.0 for the constant size, whose frame is not at the address printed below. */
#if defined(__clang__)
#define MT_NOT_CLONED __attribute__((noinline))
#else
#define MT_NOT_CLONED __attribute__((noinline, noclone))
#endif
MT_NOT_CLONED static void *site(size_t size) {
  void *p = malloc(size);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void *volatile sink;

static int basic(void) {
  void *blocks[100];
  unsigned sum = 0;
  for (int i = 0; i < 100; i++) {
    blocks[i] = site(1234);
    memset(blocks[i], i, 1234);
    sum += ((unsigned char *)blocks[i])[7];
  }
  for (int i = 0; i < 100; i++)
    free(blocks[i]);
  char *c = calloc(10, 777);
  errno = 0;
  volatile size_t huge = SIZE_MAX / 2; /* hidden from the compiler's size check */
  void *overflow = calloc(huge, 3);
  int overflow_errno = errno;
  char *volatile none = NULL; /* so that the compiler keeps realloc(NULL, n) a realloc */
  char *r = realloc(none, 5001);
  r = realloc(r, 5002);
  r = realloc(r, 5003);
  void *pm = NULL;
  int pm_rc = posix_memalign(&pm, 64, 4321);
  void *aa = aligned_alloc(128, 4352);
  void *ma = memalign(256, 4353);
  void *va = valloc(4354);
  void *pv = pvalloc(4355);
  void *ra = reallocarray(NULL, 3, 1455);
  size_t usable = malloc_usable_size(c);
  /* Escaping through a volatile keeps the compiler from removing an allocation it can see all of
   * (gcc drops an aligned_alloc whose block is only tested for alignment and freed). */
  for (void **keep = (void *[]){c, r, pm, aa, ma, va, pv, ra, NULL}; *keep; keep++)
    sink = *keep;
  void *region = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *reserved = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(region, 1 << 20);
  munmap(reserved, 1 << 20);
  fprintf(stderr, "site %p\n", (void *)site);
  printf("sum %u calloc %d overflow %s errno %s posix_memalign %d aligned %d %d %d %d usable %d\n",
         sum, c[100], overflow ? "non-null" : "null", overflow_errno == ENOMEM ? "ENOMEM" : "?",
         pm_rc, ((uintptr_t)pm & 63) == 0, ((uintptr_t)aa & 127) == 0, ((uintptr_t)ma & 255) == 0,
         va && pv && ra, usable >= 7770);
  free(c);
  free(r);
  free(pm);
  free(aa);
  free(ma);
  free(va);
  free(pv);
  free(ra);
  return 0;
}

static void *thread_main(void *arg) {
  (void)arg;
  for (int i = 0; i < 100; i++)
    free(site(3333));
  return NULL;
}

/* 8 rounds of 4 threads: more threads than glibc's stack cache keeps, so that libc frees the
 * thread-local storage of finished threads while the program runs. */
static int threads(void) {
  for (int round = 0; round < 8; round++) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < 4; i++)
      pthread_join(t[i], NULL);
  }
  printf("threads done\n");
  return 0;
}

static int forking(void) {
  free(site(1111));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 10; i++)
      free(site(2222));
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  fprintf(stderr, "child %d\n", (int)pid);
  printf("child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

static int sampled(void) {
  unsigned sum = 0;
  for (int i = 0; i < 20000; i++) {
    unsigned char *p = site(1000);
    p[0] = (unsigned char)i;
    sum += p[0];
    free(p);
  }
  printf("sampled %u\n", sum);
  return 0;
}

static volatile sig_atomic_t handled;

static void handler(int sig) {
  (void)sig;
  void *p = malloc(4444); /* often while the interrupted code is inside malloc or the shim */
  sink = p;
  free(p);
  handled++;
}

static int signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, NULL);
  unsigned sum = 0;
  for (int i = 0; i < 20000 || handled < 20; i++) {
    unsigned char *p = site(48 + i % 200);
    p[0] = 1;
    sum += p[0];
    free(p);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  fprintf(stderr, "handled %d\n", (int)handled);
  printf("signals done %u\n", sum >= 20000);
  return 0;
}

static int loading(const char *library) {
  void *h = dlopen(library, RTLD_NOW);
  if (!h) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  void *(*work)(void) = (void *(*)(void))dlsym(h, "tracer_prog_lib_work");
  void *p = work();
  free(p);
  dlclose(h);
  printf("library loaded, used and unloaded\n");
  return 0;
}

/* 300 frames of recursion, then an allocation and a realloc: deeper than the 256 frames a record
 * keeps. */
__attribute__((noinline)) static int recurse(int depth) {
  if (depth == 0) {
    free(site(8888));
    char *grown = realloc(site(16), 7777);
    sink = grown; /* used: a compiler may delete a realloc whose block is only freed */
    free(grown);
    return 0;
  }
  int r = recurse(depth - 1);
  __asm__ volatile("" ::: "memory"); /* no tail call: every level keeps its frame */
  return r + 1;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

/* Regions: MAP_FIXED over a region, a partial munmap, a growing mremap, one that keeps the old
 * range (MREMAP_DONTUNMAP), a file mapping. The
 * addresses go to stderr, as offsets from the first mapping where they are inside it. */
static int regions(void) {
  char *r = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *fixed = mmap(r + (1 << 20), 65536, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  /* Calls the kernel refuses change nothing: an unaligned or empty munmap, a MAP_FIXED at an
   * unaligned address or of a descriptor that is not open. */
  int refused = munmap(r + 1, 4096) == -1 && munmap(r, 0) == -1 &&
                mmap(r + 100, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0) == MAP_FAILED &&
                mmap(r, 8192, PROT_READ, MAP_SHARED | MAP_FIXED, 12345, 0) == MAP_FAILED;
  munmap(r, 4096);
  munmap(r + 8192, 10); /* the kernel unmaps the whole page */
  char *small = mmap(NULL, 100, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (small != MAP_FAILED)
    munmap(small, 100);
  char *moved = mremap(fixed, 65536, 131072, MREMAP_MAYMOVE);
  /* Moved elsewhere with MREMAP_DONTUNMAP (Linux 5.7): the old range stays mapped, emptied. */
  char *twin = moved == MAP_FAILED
                   ? MAP_FAILED
                   : mremap(moved, 131072, 131072, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
  FILE *self = fopen("/proc/self/exe", "r");
  void *file = self ? mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fileno(self), 0) : MAP_FAILED;
  if (file != MAP_FAILED)
    munmap(file, 4096);
  if (self)
    fclose(self);
  if (twin != MAP_FAILED)
    munmap(twin, 131072);
  munmap(moved, 131072);
  munmap(r + 4096, (2 << 20) - 4096);
  fprintf(stderr, "region %p moved %p\n", (void *)r, (void *)moved);
  printf("regions %d\n", fixed == r + (1 << 20) && refused && small != MAP_FAILED &&
                             moved != MAP_FAILED && twin != MAP_FAILED && file != MAP_FAILED);
  return 0;
}

extern char **environ;

static int spawning(void) {
  char *argv[] = {"/bin/true", NULL};
  pid_t a;
  int status;
  if (posix_spawn(&a, "/bin/true", NULL, NULL, argv, environ) != 0)
    return 1;
  waitpid(a, &status, 0);
  pid_t b = vfork();
  if (b == 0) {
    execv("/bin/true", argv);
    _exit(127);
  }
  waitpid(b, &status, 0);
  free(site(7777));
  fprintf(stderr, "child %d child %d\n", (int)a, (int)b);
  printf("spawned %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "basic";
  if (!strcmp(mode, "basic"))
    return basic();
  if (!strcmp(mode, "threads"))
    return threads();
  if (!strcmp(mode, "fork"))
    return forking();
  if (!strcmp(mode, "sampled"))
    return sampled();
  if (!strcmp(mode, "signals"))
    return signals();
  if (!strcmp(mode, "dlopen") && argc > 2)
    return loading(argv[2]);
  if (!strcmp(mode, "spawn"))
    return spawning();
  if (!strcmp(mode, "regions"))
    return regions();
  if (!strcmp(mode, "deep"))
    return printf("depth %d\n", recurse(300)) < 0;
  fprintf(stderr, "tracer_prog: unknown mode %s\n", mode);
  return 2;
}
