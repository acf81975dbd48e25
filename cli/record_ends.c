/* memtap record's end watcher (record_ends.h): one thread blocked in epoll_wait on the traced
 * processes' pidfds, each watched once (EPOLLONESHOT: a pidfd stays readable), stamping the clock
 * as it wakes and queueing the stamp under a mutex for the main loop to take. The main loop's own
 * naps still wake at an end; what this adds is the time of an end that came while the main loop
 * was not napping (finishing a trace, reading symbols in a poll).
 *
 * A process that started and ended while the main loop was busy would still be found ended
 * (docs/record.md §7: ended when memtap found it, long after), so the thread also lists the ring
 * directory when the main loop has not for DISCOVER_NS, and watches each new ring file's process
 * itself ("found"), keyed by its ring file, until the main loop adopts it or the file goes. */
#include "record_ends.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "record_dir.h"
#include "ring/process.h"
#include "ring/user_dir.h"

/* The stop descriptor's key: never a caller's (keys are the caller's serials, from 0 up). */
#define STOP_KEY UINT64_MAX
/* The keys of the processes the thread found itself: at and above it. */
#define FOUND_KEY_BASE (UINT64_C(1) << 62)
/* The thread lists the ring directory when the main loop has not for this long (twice its own
 * period, memtap record's SCAN_US), looking again at most as often. */
#define DISCOVER_NS 40000000
#define DISCOVER_WAIT_MS 20

typedef struct stamp {
  uint64_t key;
  int64_t ended_ns;
} stamp;

/* A ring file the thread found. */
typedef struct found {
  dev_t dev;
  ino_t ino;
  int pid;             /* 0: not a process the thread watches (another namespace's, gone) */
  uint64_t start_time; /* /proc/PID/stat field 22, read while its pidfd said it ran */
  int pidfd;           /* -1 once ended, adopted, or when not watched */
  uint64_t key;
  int64_t ended_ns; /* 0 while it runs */
  bool adopted;     /* the main loop's now: its end is queued as the main loop's are */
  bool listed;      /* seen in the listing under way */
} found;

struct record_ends {
  int epoll_fd;
  int stop_fd; /* an eventfd: written once, to end the thread */
  pthread_t thread;
  pthread_mutex_t lock; /* guards the stamps and the found */
  stamp *stamps;
  size_t count, cap;
  char *ring_dir;             /* NULL: no discovery */
  _Atomic int64_t scanned_ns; /* CLOCK_MONOTONIC of the main loop's last listing */
  int64_t discovered_ns;      /* of the thread's own, in the thread */
  found *found;
  size_t found_count, found_cap;
  uint64_t found_keys;
};

static int64_t monotonic_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Under the lock: the file `st` of the listing, watched from now on if its process (`pid`, of
 * memtap's namespace) runs. Each file is looked at once, however long it stays. */
static void consider(record_ends *w, const struct stat *st, const char *name) {
  for (size_t i = 0; i < w->found_count; i++)
    if (w->found[i].dev == st->st_dev && w->found[i].ino == st->st_ino) {
      w->found[i].listed = true;
      return;
    }
  if (!MT_GROW_FROM(w->found, w->found_cap, w->found_count + 1, 16))
    return;
  found f = {.dev = st->st_dev, .ino = st->st_ino, .pidfd = -1, .listed = true};
  int pid;
  uint64_t ns;
  if (record_dir_ring_name(name, &pid, &ns) && !ns) {
    /* The start time read while the pidfd (taken first) says the process runs is its own: its
     * pid cannot have been given to another before it is reaped. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd ended = {.fd = pidfd, .events = POLLIN};
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
                             .data.u64 = FOUND_KEY_BASE + w->found_keys};
    if (pidfd >= 0 && mt_process_stat(pid, &f.start_time, NULL) && f.start_time &&
        poll(&ended, 1, 0) == 0 && epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, pidfd, &ev) == 0) {
      f.pid = pid;
      f.pidfd = pidfd;
      f.key = ev.data.u64;
      w->found_keys++;
    } else if (pidfd >= 0) {
      close(pidfd);
    }
  }
  w->found[w->found_count++] = f;
}

/* Under the lock: the ring files of the directory open at `dfd` (taken), and of its user
 * subdirectories (uid-N, ring/user_dir.h) when it is the ring directory itself (`sub` NULL). */
static void list_dir(record_ends *w, int dfd, const char *sub) {
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    struct stat st;
    uid_t uid;
    if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
      continue;
    if (!sub && S_ISDIR(st.st_mode) && mt_ring_user_dir_parse(e->d_name, &uid)) {
      int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0)
        list_dir(w, fd, e->d_name);
      continue;
    }
    char name[512];
    if (S_ISREG(st.st_mode) && snprintf(name, sizeof name, "%s%s%s", sub ? sub : "", sub ? "/" : "",
                                        e->d_name) < (int)sizeof name)
      consider(w, &st, name);
  }
  closedir(d);
}

/* Lists the ring directory, watching the processes of new ring files; forgets the files gone
 * from it (their processes' watches with them, unless adopted). */
static void discover(record_ends *w) {
  int fd = open(w->ring_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  pthread_mutex_lock(&w->lock);
  for (size_t i = 0; i < w->found_count; i++)
    w->found[i].listed = false;
  list_dir(w, fd, NULL);
  size_t kept = 0;
  for (size_t i = 0; i < w->found_count; i++) {
    if (w->found[i].listed)
      w->found[kept++] = w->found[i];
    else if (w->found[i].pidfd >= 0)
      close(w->found[i].pidfd); /* its watch goes with it */
  }
  w->found_count = kept;
  pthread_mutex_unlock(&w->lock);
}

/* Under the lock: an end stamped at `ns` for `key`. One the thread found and the main loop has
 * not adopted stays with it, for record_ends_adopt. */
static void stamp_end(record_ends *w, uint64_t key, int64_t ns) {
  if (key >= FOUND_KEY_BASE)
    for (size_t i = 0; i < w->found_count; i++) {
      found *f = &w->found[i];
      if (f->key == key && f->pid && !f->adopted) {
        f->ended_ns = ns;
        close(f->pidfd);
        f->pidfd = -1;
        return;
      }
    }
  if (MT_GROW_FROM(w->stamps, w->cap, w->count + 1, 8)) /* else noted later, by a nap */
    w->stamps[w->count++] = (stamp){key, ns};
}

static void *watch(void *arg) {
  record_ends *w = arg;
  struct epoll_event events[16];
  for (;;) {
    int n = epoll_wait(w->epoll_fd, events, 16, w->ring_dir ? DISCOVER_WAIT_MS : -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return NULL; /* the main loop's naps still note ends, only later */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    bool stop = false;
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < n; i++) {
      if (events[i].data.u64 == STOP_KEY)
        stop = true;
      else
        stamp_end(w, events[i].data.u64, ns);
    }
    pthread_mutex_unlock(&w->lock);
    if (stop)
      return NULL;
    int64_t mono = monotonic_ns();
    if (w->ring_dir &&
        mono - atomic_load_explicit(&w->scanned_ns, memory_order_relaxed) >= DISCOVER_NS &&
        mono - w->discovered_ns >= DISCOVER_WAIT_MS * 1000000) {
      discover(w);
      w->discovered_ns = mono;
    }
  }
}

record_ends *record_ends_start(const char *ring_dir) {
  record_ends *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  if (ring_dir && !(w->ring_dir = strdup(ring_dir))) {
    free(w);
    return NULL;
  }
  atomic_init(&w->scanned_ns, monotonic_ns());
  w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event stop = {.events = EPOLLIN, .data.u64 = STOP_KEY};
  bool ok = w->epoll_fd >= 0 && w->stop_fd >= 0 &&
            epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->stop_fd, &stop) == 0 &&
            pthread_mutex_init(&w->lock, NULL) == 0;
  if (ok) {
    /* No signal for this thread: memtap's handlers (the signals it passes on to the program)
     * and its blocked SIGCHLD belong to the main loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ok = pthread_create(&w->thread, NULL, watch, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok)
      pthread_mutex_destroy(&w->lock);
  }
  if (!ok) {
    if (w->epoll_fd >= 0)
      close(w->epoll_fd);
    if (w->stop_fd >= 0)
      close(w->stop_fd);
    free(w->ring_dir);
    free(w);
    return NULL;
  }
  return w;
}

void record_ends_scanned(record_ends *w) {
  if (w)
    atomic_store_explicit(&w->scanned_ns, monotonic_ns(), memory_order_relaxed);
}

bool record_ends_adopt(record_ends *w, int pid, uint64_t start_time, int *pidfd, uint64_t *key,
                       int64_t *ended_ns) {
  if (!w || pid <= 0 || !start_time)
    return false;
  bool adopted = false;
  pthread_mutex_lock(&w->lock);
  for (size_t i = 0; i < w->found_count && !adopted; i++) {
    found *f = &w->found[i];
    if (f->pid == pid && f->start_time == start_time && !f->adopted) {
      f->adopted = adopted = true;
      *pidfd = f->pidfd;
      *key = f->key;
      *ended_ns = f->ended_ns;
      f->pidfd = -1;
    }
  }
  pthread_mutex_unlock(&w->lock);
  return adopted;
}

bool record_ends_watch(record_ends *w, int pidfd, uint64_t key) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = key};
  return w && pidfd >= 0 && key < FOUND_KEY_BASE &&
         epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, pidfd, &ev) == 0;
}

void record_ends_take(record_ends *w, void (*noted)(void *user, uint64_t key, int64_t ended_ns),
                      void *user) {
  if (!w)
    return;
  pthread_mutex_lock(&w->lock);
  stamp *stamps = w->stamps;
  size_t count = w->count;
  w->stamps = NULL;
  w->count = w->cap = 0;
  pthread_mutex_unlock(&w->lock);
  for (size_t i = 0; i < count; i++)
    noted(user, stamps[i].key, stamps[i].ended_ns);
  free(stamps);
}

void record_ends_stop(record_ends *w) {
  if (!w)
    return;
  uint64_t one = 1;
  while (write(w->stop_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->lock);
  close(w->epoll_fd);
  close(w->stop_fd);
  for (size_t i = 0; i < w->found_count; i++)
    if (w->found[i].pidfd >= 0)
      close(w->found[i].pidfd);
  free(w->found);
  free(w->ring_dir);
  free(w->stamps);
  free(w);
}
