/* The processes of a `memtap record` run that went untraced: without --follow-fork, each forked
 * or exec'd descendant of the traced program, and with or without it, each copy made by the clone
 * system call without fork handlers, leaves a note, `<pid>.untraced`, in the ring directory (the
 * shim writes it: src/tracer/state.c), holding the program it runs, after a `+` for a clone copy
 * or a `!` for a process whose ring file could not be made (a limit of the program's).
 * memtap collects the notes at each directory scan (removing them, so that a program forking by
 * the thousand leaves no pile of files) and says at the end how many processes went untraced,
 * which programs they ran and why, pointing at --follow-fork where it would help (docs/record.md
 * §8). */
#ifndef MEMTAP_CLI_RECORD_UNTRACED_H
#define MEMTAP_CLI_RECORD_UNTRACED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hashmap.h"

/* The names the message shows; the count goes on past them. */
#define RECORD_UNTRACED_NAMES 6
/* The distinct program names kept: a process named by none past them is counted, not named. */
#define RECORD_UNTRACED_KEPT 256

typedef struct record_untraced {
  /* Every process noted: pid -> 1 + the index in `names` of the program it ran last (a process
   * that exec'd is named by what it became, not by its parent's program), 0 when unknown. */
  mt_hashmap pids;
  char **names; /* distinct program names, in the order first noted */
  size_t name_count, name_cap;
  size_t clones;        /* notes of clone copies, which --follow-fork cannot trace */
  size_t ring_failures; /* notes of processes whose ring file could not be made */
  size_t misconfigured; /* notes of followed processes whose MEMTAP_* their program set malformed */
} record_untraced;

/* Whether `name`, an entry of the ring directory open at `dir_fd`, is such a note; if so, it is
 * read, counted and removed. */
bool record_untraced_take(record_untraced *u, int dir_fd, const char *name);

/* After the run: one line on stderr when any process went untraced, e.g. `memtap: note: 3 processes
 * that gcc started were not traced (cc1, as, collect2); --follow-fork traces each into
 * T.ctf.<pid>`. `program` is the traced command, `output` the main trace. Copies made by the
 * clone system call without fork handlers (src/ring/producer.h) are said to be such, since
 * --follow-fork cannot trace them either. */
void record_untraced_say(const record_untraced *u, const char *program, const char *output);

void record_untraced_free(record_untraced *u);

/* Whether `name` is the name of such a note, or of one being written (`<pid>.untraced.part`, which
 * the shim renames when whole): for the sweep of abandoned ring directories. */
bool record_untraced_is_note(const char *name);

#endif
