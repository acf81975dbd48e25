/* threads: allocation across threads, one pattern per mode (argv[1]):
 *   cross   4 threads each allocate blocks that the next thread frees
 *   many    64 threads at once, each allocating and freeing
 *   crowd   600 threads alive at once (more than the 256 rings a ring file once had), each
 *           allocating, then waiting for all the others before it frees
 *   short   10 000 short-lived threads, two at a time, each one malloc and one free
 *   queue   producer/consumer hand-off through a bounded queue: 2 producers allocate, 2 consumers
 *           free, everything pinned to one CPU so that the threads preempt each other between
 *           the allocator returning and the tracer publishing (ordering under stress)
 *   handback  a block handed to another thread, shrunk in place there by realloc and handed
 *           back to be freed (its address comes straight back to the next malloc), 20 000 times:
 *           the realloc and the frees around it on two threads, within microseconds
 *   maps    one thread maps a region and unmaps it, then the other maps one of the same size
 *           (the kernel hands the range straight back), keeps it 1 ms and unmaps it; prints how
 *           many ranges came back
 *   churn N N malloc/free pairs in the main thread (a trace of known size)
 *   signals prints which of HUP, INT, QUIT, TERM, XFSZ and PIPE it ignores (as inherited)
 *   fds     prints the descriptors it has open, from the main thread and from a new thread that
 *           allocates: the same list traced as untraced (the tracer keeps none of its own)
 *   cancel-start  20 threads cancelled at once after pthread_create (or once they run) whose
 *           function has no cancellation point: each must run and return, as untraced
 *   cancel-malloc MS  a thread that allocates only while it holds a mutex and is cancelled (its
 *           pthread_testcancel) MS ms later: the mutex must be free after the join, whatever
 *           the tracer waited for inside malloc (a stopped consumer)
 *   closefds [FILE]  as daemons and sandboxes do: closes every descriptor it inherited (the
 * tracer's ring file among them) and puts a file of its own on descriptors 3..63 (whatever number
 * the tracer had), then runs the cross pattern in new threads and forks a child that allocates; the
 * file must be untouched through all of it */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_program.h"

#define CROSS_THREADS 4
#define CROSS_BLOCKS 500
#define MANY_THREADS 64
#define MANY_BLOCKS 100
#define CROWD_THREADS 600
#define CROWD_BLOCKS 100
#define SHORT_THREADS 10000
#define QUEUE_ITEMS 20000
#define QUEUE_SIZE 64

static void *cross_blocks[CROSS_THREADS][CROSS_BLOCKS];
static pthread_barrier_t barrier;

static void *cross_thread(void *arg) {
  int self = (int)(long)arg;
  for (int i = 0; i < CROSS_BLOCKS; i++)
    cross_blocks[self][i] = malloc(32); // @expect[cross,closefds] allocs=2000 frees=2000 words=8000
  pthread_barrier_wait(&barrier);
  int victim = (self + 1) % CROSS_THREADS;
  for (int i = 0; i < CROSS_BLOCKS; i++)
    free(cross_blocks[victim][i]);
  return NULL;
}

static void *many_thread(void *arg) {
  (void)arg;
  void *mine[MANY_BLOCKS];
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < MANY_BLOCKS; i++)
    mine[i] = malloc(48); // @expect[many] allocs=6400 frees=6400 words=38400
  for (int i = 0; i < MANY_BLOCKS; i++)
    free(mine[i]);
  return NULL;
}

static void *crowd_thread(void *arg) {
  (void)arg;
  void *mine[CROWD_BLOCKS];
  for (int i = 0; i < CROWD_BLOCKS; i++)
    mine[i] = malloc(40); // @expect[crowd] allocs=60000 frees=60000 words=300000
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < CROWD_BLOCKS; i++)
    free(mine[i]);
  return NULL;
}

/* CROWD_THREADS threads on small stacks, all alive at once. */
static void crowd(void) {
  static pthread_t threads[CROWD_THREADS];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_barrier_init(&barrier, NULL, CROWD_THREADS);
  for (int i = 0; i < CROWD_THREADS; i++) {
    if (pthread_create(&threads[i], &attr, crowd_thread, NULL) != 0) {
      fprintf(stderr, "threads crowd: cannot start thread %d\n", i);
      exit(1);
    }
  }
  for (int i = 0; i < CROWD_THREADS; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  pthread_attr_destroy(&attr);
}

static void *short_thread(void *arg) {
  (void)arg;
  void *p = malloc(56); // @expect[short] allocs=10000 frees=10000 words=70000
  KEEP(p);
  free(p);
  return NULL;
}

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  void *items[QUEUE_SIZE];
  size_t head, count;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void queue_push(void *p) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE_SIZE)
    pthread_cond_wait(&queue.changed, &queue.lock);
  queue.items[(queue.head + queue.count++) % QUEUE_SIZE] = p;
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
}

static void *queue_pop(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0)
    pthread_cond_wait(&queue.changed, &queue.lock);
  void *p = queue.items[queue.head];
  queue.head = (queue.head + 1) % QUEUE_SIZE;
  queue.count--;
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
  return p;
}

static void *producer(void *arg) {
  (void)arg;
  for (int i = 0; i < QUEUE_ITEMS / 2; i++) {
    /* Few distinct sizes: the allocator hands the same addresses out again and again, so a
     * free and the next allocation at its address race across threads. */
    long *p = malloc(16 + 16 * (size_t)(i % 3)); // @expect[queue] allocs=20000 frees=20000
    p[0] = i;
    queue_push(p);
    if (i % 7 == 0)
      sched_yield();
  }
  return NULL;
}

static void *consumer(void *arg) {
  long *sum = arg;
  for (int i = 0; i < QUEUE_ITEMS / 2; i++) {
    long *p = queue_pop();
    *sum += p[0];
    free(p);
  }
  return NULL;
}

#define HANDBACKS 20000
#define MAPS 150
#define MAP_BYTES (64 * 1024)
#define MAP_RW(n) mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)

static _Atomic(void *) to_other, to_first;
static atomic_int map_turn; /* 0: the mapping thread's turn, 1: the main thread's */
static _Atomic(void *) last_unmapped;

static void *shrink_handed_blocks(void *arg) {
  (void)arg;
  for (int i = 0; i < HANDBACKS; i++) {
    void *p;
    while (!(p = atomic_exchange(&to_other, NULL)))
      sched_yield();
    p = realloc(p, 16); // @expect[handback] allocs=20000 frees=20000 words=40000
    while (atomic_load(&to_first))
      sched_yield();
    atomic_store(&to_first, p);
  }
  return NULL;
}

static void handback(void) {
  pthread_t t;
  pthread_create(&t, NULL, shrink_handed_blocks, NULL);
  for (int i = 0; i < HANDBACKS; i++) {
    void *p = malloc(64); // @expect[handback] allocs=20000 frees=20000 words=160000
    memset(p, 1, 64);
    while (atomic_load(&to_other))
      sched_yield();
    atomic_store(&to_other, p);
    void *q;
    while (!(q = atomic_exchange(&to_first, NULL)))
      sched_yield();
    free(q);
  }
  pthread_join(t, NULL);
}

static void *map_and_unmap(void *arg) {
  (void)arg;
  for (int i = 0; i < MAPS; i++) {
    while (atomic_load(&map_turn) != 0)
      sched_yield();
    char *p = MAP_RW(MAP_BYTES); // @expect[maps] allocs=150 frees=150
    p[0] = 1;
    atomic_store(&last_unmapped, p);
    munmap(p, MAP_BYTES);
    atomic_store(&map_turn, 1);
  }
  return NULL;
}

static void maps(void) {
  pthread_t t;
  int reused = 0;
  pthread_create(&t, NULL, map_and_unmap, NULL);
  for (int i = 0; i < MAPS; i++) {
    while (atomic_load(&map_turn) != 1)
      sched_yield();
    char *p = MAP_RW(MAP_BYTES); // @expect[maps] allocs=150 frees=150
    p[0] = 2;
    reused += p == atomic_load(&last_unmapped);
    usleep(1000); /* the region lives at least 1 ms */
    munmap(p, MAP_BYTES);
    atomic_store(&map_turn, 0);
  }
  pthread_join(t, NULL);
  fprintf(stderr, "maps: %d of %d ranges came straight back\n", reused, MAPS);
}

static void run(int nthreads, void *(*fn)(void *)) {
  pthread_t *threads =
      malloc((size_t)nthreads * sizeof *threads); // @expect[cross,many,closefds] allocs=1 frees=1
  pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
  for (int i = 0; i < nthreads; i++)
    pthread_create(&threads[i], NULL, fn, (void *)(long)i);
  for (int i = 0; i < nthreads; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  free(threads);
}

#define OWN_FD_LAST 63

/* Whether descriptors 3..OWN_FD_LAST all still name `st`'s file and it holds exactly `text`. */
static int own_file_intact(const struct stat *st, int fd, const char *text) {
  for (int n = 3; n <= OWN_FD_LAST; n++) {
    struct stat now;
    if (fstat(n, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
      return 0;
  }
  char buf[64];
  ssize_t got = pread(fd, buf, sizeof buf, 0);
  return got == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)got) == 0;
}

static void print_open_descriptors(const char *when) {
  char line[1024];
  size_t len = (size_t)snprintf(line, sizeof line, "%s:", when);
  for (int n = 0; n < 1024 && len + 8 < sizeof line; n++) {
    struct stat st;
    if (fstat(n, &st) == 0)
      len += (size_t)snprintf(line + len, sizeof line - len, " %d", n);
  }
  puts(line);
}

static void *fds_thread(void *arg) {
  void *p = malloc(1000); // @expect[fds] allocs=1 frees=1
  KEEP(p);
  print_open_descriptors(arg);
  free(p);
  return NULL;
}

/* `file`: the program's own file (created), or NULL for a temporary one. */
static int closefds(const char *file) {
  static const char text[] = "the program's own file";
  for (int n = 3; n < 1024; n++)
    close(n);
  char path[] = "/tmp/threads-closefds-XXXXXX";
  int fd = file ? open(file, O_RDWR | O_CREAT | O_TRUNC, 0600) : mkstemp(path);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
    perror("closefds: own file");
    return 1;
  }
  if (!file)
    unlink(path);
  usleep(30000); /* a consumer thread in the process (MEMTAP=) polls meanwhile */
  for (int n = 3; n <= OWN_FD_LAST; n++)
    if (n != fd && dup2(fd, n) != n) {
      perror("closefds: dup2");
      return 1;
    }
  struct stat st;
  fstat(fd, &st);
  run(CROSS_THREADS, cross_thread);
  pid_t child = fork();
  if (child == 0) {
    void *p = malloc(100);
    KEEP(p);
    free(p);
    _exit(own_file_intact(&st, fd, text) ? 0 : 3);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    printf("closefds: the child found its file touched (status %d)\n", status);
    return 1;
  }
  if (!own_file_intact(&st, fd, text)) {
    printf("closefds: the file was touched\n");
    return 1;
  }
  return 0;
}

/* cancel-start: a thread with no cancellation point of its own. */
static _Atomic int cancel_go, cancel_entered;

static void *uncancellable_thread(void *arg) {
  atomic_store(&cancel_entered, 1);
  while (!atomic_load(&cancel_go)) {
  }
  void *p = malloc(100); // @expect[cancel-start] allocs=20 frees=20
  KEEP(p);
  free(p);
  return arg;
}

static void cancel_start(void) {
  int returned = 0;
  for (int round = 0; round < 20; round++) {
    atomic_store(&cancel_go, 0);
    atomic_store(&cancel_entered, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, uncancellable_thread, (void *)1) != 0)
      return;
    while (round % 2 && !atomic_load(&cancel_entered)) {
    }
    pthread_cancel(t);
    atomic_store(&cancel_go, 1);
    void *result = NULL;
    pthread_join(t, &result);
    returned += result == (void *)1;
  }
  printf("cancel-start: %d of 20 threads returned\n", returned);
}

/* cancel-malloc: allocation only under the lock, the one cancellation point after it. */
static pthread_mutex_t cancel_lock = PTHREAD_MUTEX_INITIALIZER;

static void *locked_allocator(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&cancel_lock);
    for (int i = 0; i < 200; i++) {
      void *p = malloc(64);
      KEEP(p);
      free(p);
    }
    pthread_mutex_unlock(&cancel_lock);
    pthread_testcancel();
  }
  return NULL;
}

static int cancel_malloc(long ms) {
  pthread_t t;
  if (pthread_create(&t, NULL, locked_allocator, NULL) != 0)
    return 1;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&pause, NULL);
  pthread_cancel(t);
  void *result = NULL;
  pthread_join(t, &result);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  int rc = pthread_mutex_timedlock(&cancel_lock, &until);
  printf("cancel-malloc: thread %s, mutex %s\n",
         result == PTHREAD_CANCELED ? "cancelled" : "returned",
         rc == 0 ? "free" : "still held by the cancelled thread");
  return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "cross") == 0) {
    run(CROSS_THREADS, cross_thread);
  } else if (strcmp(mode, "many") == 0) {
    run(MANY_THREADS, many_thread);
  } else if (strcmp(mode, "crowd") == 0) {
    crowd();
  } else if (strcmp(mode, "short") == 0) {
    pthread_t *threads = malloc(2 * sizeof *threads); // @expect[short] allocs=1 frees=1
    for (int i = 0; i < SHORT_THREADS; i += 2) {
      pthread_create(&threads[0], NULL, short_thread, NULL);
      pthread_create(&threads[1], NULL, short_thread, NULL);
      pthread_join(threads[0], NULL);
      pthread_join(threads[1], NULL);
    }
    free(threads);
  } else if (strcmp(mode, "queue") == 0) {
    /* The first CPU this process may run on (not CPU 0: a cpuset may exclude it). */
    cpu_set_t allowed, one;
    CPU_ZERO(&one);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &allowed)) {
          CPU_SET(cpu, &one);
          break;
        }
      }
    }
    if (CPU_COUNT(&one) == 0 || sched_setaffinity(0, sizeof one, &one) != 0)
      perror("sched_setaffinity");
    long sums[2] = {0, 0};
    pthread_t threads[4];
    pthread_create(&threads[0], NULL, producer, NULL);
    pthread_create(&threads[1], NULL, producer, NULL);
    pthread_create(&threads[2], NULL, consumer, &sums[0]);
    pthread_create(&threads[3], NULL, consumer, &sums[1]);
    for (int i = 0; i < 4; i++)
      pthread_join(threads[i], NULL);
    printf("queue sum %ld\n", sums[0] + sums[1]);
  } else if (strcmp(mode, "handback") == 0) {
    handback();
  } else if (strcmp(mode, "maps") == 0) {
    maps();
  } else if (strcmp(mode, "churn") == 0 && argc > 2) {
    long n = atol(argv[2]);
    for (long i = 0; i < n; i++) {
      void *p = malloc(24 + (size_t)(i % 200)); // @expect[churn] frees=allocs
      KEEP(p);
      free(p);
    }
  } else if (strcmp(mode, "signals") == 0) {
    static const int numbers[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGXFSZ, SIGPIPE};
    static const char *const names[] = {"HUP", "INT", "QUIT", "TERM", "XFSZ", "PIPE"};
    printf("ignored:");
    for (int i = 0; i < 6; i++) {
      struct sigaction sa;
      if (sigaction(numbers[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        printf(" %s", names[i]);
    }
    printf("\n");
  } else if (strcmp(mode, "fds") == 0) {
    print_open_descriptors("main");
    pthread_t t;
    pthread_create(&t, NULL, fds_thread, "thread");
    pthread_join(t, NULL);
  } else if (strcmp(mode, "cancel-start") == 0) {
    cancel_start();
  } else if (strcmp(mode, "cancel-malloc") == 0 && argc > 2) {
    if (cancel_malloc(atol(argv[2])) != 0)
      return 1;
  } else if (strcmp(mode, "closefds") == 0) {
    if (closefds(argc > 2 ? argv[2] : NULL) != 0)
      return 1;
  } else {
    fprintf(stderr, "usage: threads cross|many|crowd|short|queue|churn N|signals|fds|cancel-start|"
                    "cancel-malloc MS|closefds [FILE]\n");
    return 64;
  }
  printf("threads %s done\n", mode);
  return 0;
}
