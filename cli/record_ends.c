/* memtap record's end watcher (record_ends.h): one thread blocked in epoll_wait on the traced
 * processes' pidfds, each watched once (EPOLLONESHOT: a pidfd stays readable), stamping the clock
 * as it wakes and queueing the stamp under a mutex for the main loop to take. The main loop's own
 * naps still wake at an end; what this adds is the time of an end that came while the main loop
 * was not napping (finishing a trace, reading symbols in a poll). */
#include "record_ends.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"

/* The stop descriptor's key: never a caller's (keys are the caller's serials, from 0 up). */
#define STOP_KEY UINT64_MAX

typedef struct stamp {
  uint64_t key;
  int64_t ended_ns;
} stamp;

struct record_ends {
  int epoll_fd;
  int stop_fd; /* an eventfd: written once, to end the thread */
  pthread_t thread;
  pthread_mutex_t lock; /* guards the stamps */
  stamp *stamps;
  size_t count, cap;
};

static void *watch(void *arg) {
  record_ends *w = arg;
  struct epoll_event events[16];
  for (;;) {
    int n = epoll_wait(w->epoll_fd, events, 16, -1);
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
      else if (MT_GROW_FROM(w->stamps, w->cap, w->count + 1, 8)) /* else noted later, by a nap */
        w->stamps[w->count++] = (stamp){events[i].data.u64, ns};
    }
    pthread_mutex_unlock(&w->lock);
    if (stop)
      return NULL;
  }
}

record_ends *record_ends_start(void) {
  record_ends *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
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
    free(w);
    return NULL;
  }
  return w;
}

bool record_ends_watch(record_ends *w, int pidfd, uint64_t key) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = key};
  return w && pidfd >= 0 && key != STOP_KEY &&
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
  free(w->stamps);
  free(w);
}
