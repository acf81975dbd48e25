/* recount_marker: preloaded into both runs of the independent recount. With MALLOC_TRACE set
 * (the run under glibc's libc_malloc_debug.so, preloaded before this library) it starts glibc's
 * allocation log: glibc >= 2.34 writes it only once mtrace() is called, and the programs under
 * test do not call it. Then, in both runs, it allocates and frees one block of a size no program
 * uses: the two runs are compared from that marker on, since mtrace starts only here while
 * memtap's shim starts with the first malloc, before any constructor. */
#include <mcheck.h>
#include <stdlib.h>

#define MARKER_BYTES 1234567

/* mtrace runs __libc_freeres at exit, freeing libc's own memory, which an untraced run (or one
 * under memtap) never frees: a no-op here (found first by libc_malloc_debug.so's call) keeps the
 * two runs alike. */
void __libc_freeres(void);
void __libc_freeres(void) {}

__attribute__((constructor(101))) static void start_recount(void) {
  if (getenv("MALLOC_TRACE") != NULL)
    mtrace();
  void *marker = malloc(MARKER_BYTES);
  __asm__ volatile("" : : "r"(marker) : "memory");
  free(marker);
}
