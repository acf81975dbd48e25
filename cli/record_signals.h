/* What memtap record does with the signals sent to it while the program runs (docs/record.md
 * §8, "Signals"): the program must get each one as it would untraced, once. Those sent to memtap
 * alone (`kill` of its pid) are passed on; those sent to the whole process group or by the
 * terminal reached the program already, which the tracer's count of the program's deliveries (the
 * ring file's `signals_handled`) or the signal's origin tells. SIGXFSZ and SIGPIPE are ignored
 * meanwhile. */
#ifndef MEMTAP_CLI_RECORD_SIGNALS_H
#define MEMTAP_CLI_RECORD_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtap/record.h"
#include "memtap/ring.h"

/* How long a received signal waits for the program's handler to show it got the signal too. */
#define RECORD_SIGNALS_WAIT_US 30000

/* How long the program's count may take to show a delivery memtap knows of. */
#define RECORD_SIGNALS_OWED_US 1000000

/* The signals counted and passed on after RECORD_SIGNALS_WAIT_US unless the program got them. */
#define RECORD_SIGNALS_FORWARDED 8

/* The accounts for one forwarded signal: memtap's receipts and the program's deliveries (counted
 * by its tracer, mt_recorder_signals_handled) when it last settled, and since when unmatched
 * receipts wait. */
typedef struct record_forwarding {
  const void *counter; /* whose count `handled` is: the program's recorder, or NULL */
  sig_atomic_t seen, seen_from_terminal;
  uint32_t handled;
  /* Receipts from the terminal settled as the program's too, which its count has yet to show: the
   * first increments of the count pay for them, and are no evidence for other receipts. Forgotten
   * RECORD_SIGNALS_OWED_US after the first: a program that ignores the signal never counts it. */
  uint32_t owed;
  int64_t owed_since_us;
  int64_t waiting_since_us; /* 0: nothing waits */
  bool found_ignored;       /* memtap was started ignoring it (so was the program) */
} record_forwarding;

typedef struct record_signals {
  struct sigaction old_forwarded[RECORD_SIGNALS_FORWARDED], old_xfsz, old_cont;
  bool passing[_NSIG]; /* passed on as they come: they were at their default action */
  sig_atomic_t passed[_NSIG];
  record_forwarding forwards[_NSIG];
  uint32_t program_stops; /* job-control stops of the program seen (the evidence for SIGTSTP) */
  sig_atomic_t tstp_used; /* memtap's SIGTSTP receipts when it last followed a stop */
} record_signals;

/* Installs memtap's handlers, once the program is forked (it keeps the dispositions memtap had):
 * counting for the forwarded signals and for the other signals that would kill memtap, SIGXFSZ
 * and SIGPIPE ignored. */
void record_signals_install(record_signals *rs);

/* Passes on to `child` each signal memtap received that the program did not get too: at once for
 * those the tracer cannot count, after RECORD_SIGNALS_WAIT_US without the program's count (of
 * `rec`, the program's recorder; NULL when there is none) growing for the others. True while a
 * signal waits (the caller then naps briefly). */
bool record_signals_forward(record_signals *rs, const mt_recorder *rec, pid_t child,
                            int64_t now_us);

/* The program stopped (waitpid's WUNTRACED) by `sig`. A job-control stop (SIGTSTP, SIGTTIN,
 * SIGTTOU) of the whole job (memtap got the SIGTSTP too, or the program is in memtap's process
 * group) stops memtap too, by the same signal, so that the shell that started memtap sees its
 * job stopped exactly when the program untraced would be (a program that ignores Ctrl-Z keeps
 * running, and memtap with it); memtap goes on when continued, and continues a program still
 * stopped then. Other stops (SIGSTOP, a debugger's, `kill -TSTP` of the program alone) are the
 * program's alone. */
void record_signals_program_stopped(record_signals *rs, pid_t child, int sig);

/* Puts back the dispositions record_signals_install found, but SIGPIPE's: the rest of the
 * command only writes messages, which a closed standard error must not turn into memtap's death
 * (the exit status is the program's). */
void record_signals_restore(record_signals *rs);

#endif
