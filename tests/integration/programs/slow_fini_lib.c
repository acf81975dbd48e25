/* libslow_fini.so, linked into slow_fini: its destructor pauses 300 ms as the program exits. */
#include <time.h>

void slow_fini_linked(void) {}

__attribute__((destructor)) static void pause_at_exit(void) {
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
}
