/* graceful: a server that shuts down gracefully on its first SIGTERM and is forced out by a
 * second, counting SIGHUP, SIGUSR1, SIGINT and SIGQUIT meanwhile. It allocates in rounds, printing
 * "ready" after the first, until SIGTERM; then waits 300 ms for a second one and prints the counts
 * as "hup=H usr1=U int=I term=T quit=Q". Exit 0 after one SIGTERM, 99 when a second came. The
 * signal tests send it signals through memtap record, to memtap alone or to their process group:
 * each must reach it once, as untraced. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_program.h"

static volatile sig_atomic_t hup, usr1, intr, quit, term;

static void count(int sig) {
  if (sig == SIGHUP)
    hup++;
  else if (sig == SIGUSR1)
    usr1++;
  else if (sig == SIGINT)
    intr++;
  else if (sig == SIGQUIT)
    quit++;
  else
    term++;
}

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = count;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGQUIT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  for (int round = 0; !term; round++) {
    for (int i = 0; i < 100; i++)
      free(malloc(64)); // @expect frees=allocs
    if (round == 0) {
      printf("ready\n");
      fflush(stdout);
    }
    pause_ms(20);
  }
  pause_ms(300);
  printf("hup=%d usr1=%d int=%d term=%d quit=%d\n", (int)hup, (int)usr1, (int)intr, (int)term,
         (int)quit);
  fflush(stdout);
  return term > 1 ? 99 : 0;
}
