/* memtap record's signal forwarding (record_signals.h, docs/record.md §8, "Signals"): handlers
 * that count what memtap receives, and the main loop's decision to pass each receipt on to the
 * program or not. */
#include "record_signals.h"

#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "ring/process.h"

/* What `kill` sends to memtap alone is passed on to the program, as if memtap were not there:
 * termination (the program exits with it and memtap writes the whole trace) and the signals a
 * user sends to ask a program something (dd's progress on SIGUSR1, a server reopening its logs);
 * left unhandled, any of them would kill memtap and leave the program running without it. SIGINT
 * and SIGQUIT too: the terminal sends them to the whole foreground group, program included, and
 * the count below keeps memtap from passing its copy on then; but `kill -INT` aimed at memtap
 * alone (a supervisor, `timeout -s INT`) used to be ignored, the program running on. */
static const int forwarded_signals[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2,
                                        SIGALRM, SIGINT, SIGQUIT, SIGTSTP};
#define FORWARDED_COUNT (sizeof forwarded_signals / sizeof forwarded_signals[0])
_Static_assert(FORWARDED_COUNT == RECORD_SIGNALS_FORWARDED, "record_signals.h's count");

/* The other signals that would kill memtap, left the program running without it and its trace
 * empty: the tracer counts the program's deliveries of signals 1 to 15 only, so these are passed
 * on as they come, and one sent to the whole process group reaches the program twice (better than
 * memtap dying of it). Real-time signals (SIGRTMIN to SIGRTMAX) too. Not SIGXCPU: memtap's own
 * CPU limit is not the program's. */
static const int passed_on_signals[] = {SIGSTKFLT, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSYS};
#define PASSED_ON_COUNT (sizeof passed_on_signals / sizeof passed_on_signals[0])

/* Those signals as memtap received them, counted by number. The main loop passes each of the
 * forwarded ones on (record_signals_forward) unless the program got it too: a signal sent to the
 * process group (a supervisor's `kill -TERM -PGID`, a terminal's hangup) reaches both, and a second
 * delivery would turn a graceful shutdown into a forced one. */
static volatile sig_atomic_t received[_NSIG];
/* Of those, the ones a terminal sent to its whole foreground process group (si_code SI_KERNEL,
 * which kill(2) never gives): SIGINT, SIGQUIT and SIGTSTP (Ctrl-C, Ctrl-\, Ctrl-Z), and the SIGHUP
 * the kernel sends
 * that group when the session's leader (the shell) exits, unless memtap leads a session itself
 * (`setsid memtap record`): a leader gets a hangup's SIGHUP alone. A program in memtap's group got
 * them too, whether or not the tracer runs in it to count them. Counted after `received`. */
static volatile sig_atomic_t from_terminal[_NSIG];
static bool leads_session; /* set before the handlers are */
/* SIGCONTs received: whether a stop of memtap's happened (and ended). */
static volatile sig_atomic_t continues;

static void count_continue(int sig) {
  (void)sig;
  continues++;
}

static void count_signal(int sig, siginfo_t *info, void *context) {
  (void)context;
  if (sig <= 0 || sig >= _NSIG)
    return;
  received[sig]++;
  if (info && info->si_code == SI_KERNEL &&
      (sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP || (sig == SIGHUP && !leads_session)))
    from_terminal[sig]++;
}

/* Whether memtap passes `sig` on as it comes (passed_on_signals, real-time signals). */
static bool passed_on(int sig) {
  for (size_t i = 0; i < PASSED_ON_COUNT; i++)
    if (passed_on_signals[i] == sig)
      return true;
  return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

void record_signals_install(record_signals *rs) {
  leads_session = getsid(0) == getpid();
  struct sigaction ignore = {.sa_handler = SIG_IGN}, forward = {.sa_sigaction = count_signal};
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART | SA_SIGINFO;
  /* Sent to memtap alone: passed on. Also those memtap was started ignoring (a script's
   * background job ignores SIGINT and SIGQUIT, nohup SIGHUP): the program started ignoring them
   * too (it was forked before this), but one that sets a handler of its own, as the JVM does for
   * SIGQUIT's thread dump, gets them untraced; those are passed on only while the tracer counts
   * the program's deliveries (record_signals_forward). Until 2026-11-30 memtap kept ignoring
   * SIGINT and SIGQUIT then, and `kill -QUIT` of a backgrounded `memtap record -- java ...`
   * printed no thread dump. */
  for (size_t i = 0; i < FORWARDED_COUNT; i++) {
    int sig = forwarded_signals[i];
    sigaction(sig, NULL, &rs->old_forwarded[i]);
    rs->forwards[sig].found_ignored = rs->old_forwarded[i].sa_handler == SIG_IGN;
    /* A SIGTSTP ignored stays so: the program ignores it too, and the program's stops, which
     * memtap follows (record_signals_program_stopped), are what counts for it. */
    if (sig != SIGTSTP || !rs->forwards[sig].found_ignored)
      sigaction(sig, &forward, NULL);
  }
  /* Ignored when memtap started, they stay so (and the program inherited that). */
  for (int sig = 1; sig < _NSIG; sig++) {
    struct sigaction was;
    rs->passing[sig] = passed_on(sig) && sigaction(sig, NULL, &was) == 0 &&
                       was.sa_handler == SIG_DFL && sigaction(sig, &forward, NULL) == 0;
  }
  /* Past a file size limit (ulimit -f) a write fails (EFBIG, said as a write error) rather than
   * killing memtap while the program runs: the writers also stop short of it. */
  sigaction(SIGXFSZ, &ignore, &rs->old_xfsz);
  /* A standard error that is a closed pipe (memtap record ... 2>&1 | head -1) must not kill us
   * with SIGPIPE at the closing line. The child keeps its own disposition (set before). */
  sigaction(SIGPIPE, &ignore, NULL); /* not signal(): a preloaded libjsig warns of it */
  /* memtap's own writes to a terminal it does not hold (a background job under `stty tostop`,
   * a program that took the terminal) must not stop it: the job would show stopped where the
   * program untraced is not. Not restored either: the closing line is such a write. memtap
   * stops when the program does (record_signals_program_stopped). */
  struct sigaction was, count_cont = {.sa_handler = count_continue, .sa_flags = SA_RESTART};
  sigemptyset(&count_cont.sa_mask);
  sigaction(SIGCONT, &count_cont, &rs->old_cont);
  if (sigaction(SIGTTOU, NULL, &was) == 0 && was.sa_handler == SIG_DFL)
    sigaction(SIGTTOU, &ignore, NULL);
  if (sigaction(SIGTTIN, NULL, &was) == 0 && was.sa_handler == SIG_DFL)
    sigaction(SIGTTIN, &ignore, NULL);
}

/* Stops memtap by `sig`'s default action, back when continued; the signal's disposition and the
 * signal mask as they were. */
static void stop_by(int sig) {
  struct sigaction stop = {.sa_handler = SIG_DFL}, was;
  sigemptyset(&stop.sa_mask);
  sigaction(sig, &stop, &was);
  sigset_t only, mask;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, &mask);
  raise(sig);
  sigprocmask(SIG_SETMASK, &mask, NULL);
  sigaction(sig, &was, NULL);
}

void record_signals_program_stopped(record_signals *rs, pid_t child, int sig) {
  if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
    return; /* SIGSTOP, a debugger's: the program's alone */
  rs->program_stops++;
  /* Only a stop of the whole job: the terminal's (or a group's) SIGTSTP, which memtap got too,
   * or SIGTTIN or SIGTTOU, which the kernel sends the reader's whole process group, memtap's
   * when the program is in it. A stop of the program alone (kill -TSTP PID) is its own: memtap
   * stopped, a SIGCONT to the program alone would leave it waiting for a stopped consumer. */
  bool whole_job =
      sig == SIGTSTP ? received[SIGTSTP] != rs->tstp_used : getpgid(child) == getpgrp();
  rs->tstp_used = received[SIGTSTP];
  if (!whole_job)
    return;
  sig_atomic_t continued = continues;
  stop_by(sig);
  if (continues == continued)
    return; /* not stopped: the kernel discards stop signals in an orphaned process group */
  /* Continued: the shell's fg or bg continues its job's whole group, the program included; a
   * SIGCONT to memtap alone (kill -CONT) goes on to a program still stopped, once the group's
   * SIGCONT has had time to reach it. */
  struct timespec grace = {0, 20 * 1000 * 1000};
  nanosleep(&grace, NULL);
  uint64_t start;
  char state = 0;
  if (mt_process_stat(child, &start, &state) && state == 'T')
    kill(child, SIGCONT);
}

/* Passes on to `child` each signal memtap received that its handlers did not get too, once
 * RECORD_SIGNALS_WAIT_US have shown they did not: a signal the program blocks meanwhile merges with
 * the one passed on, and one it ignores or dies of has no handler to count it (passing it on
 * changes nothing then). A program the tracer did not enter counts nothing: every signal is passed
 * on. True while a signal waits (the caller then naps briefly). */
bool record_signals_forward(record_signals *rs, const mt_recorder *rec, pid_t child,
                            int64_t now_us) {
  for (int sig = 1; sig < _NSIG; sig++)
    for (; passed_on(sig) && rs->passed[sig] != received[sig]; rs->passed[sig]++)
      kill(child, sig);
  bool waiting = false;
  for (size_t i = 0; i < FORWARDED_COUNT; i++) {
    int sig = forwarded_signals[i];
    record_forwarding *g = &rs->forwards[sig];
    /* The program's count before memtap's: a signal landing between the two loads is then in
     * both or in memtap's alone, never in the program's alone (which would pass it on twice).
     * For SIGTSTP, which the tracer does not count, the program's stops (always there). */
    const void *counter = sig == SIGTSTP ? (const void *)&rs->program_stops : (const void *)rec;
    uint32_t handled = sig == SIGTSTP ? rs->program_stops
                       : rec          ? mt_recorder_signals_handled(rec, sig)
                                      : 0;
    /* Both counts as of one moment: a handler that ran between the loads changed `terminal`. */
    sig_atomic_t got, terminal;
    do {
      terminal = from_terminal[sig];
      got = received[sig];
    } while (terminal != from_terminal[sig]);
    if (counter != g->counter) { /* a file found (or made by an exec) since: counts from 0 */
      g->counter = counter;
      g->handled = 0;
      g->owed = 0;
    }
    if (g->owed && now_us - g->owed_since_us > RECORD_SIGNALS_OWED_US)
      g->owed = 0;
    uint32_t delivered = handled - g->handled;
    uint32_t paid = delivered < g->owed ? delivered : g->owed;
    delivered -= paid;
    if (got == g->seen) {
      g->owed -= paid;
      g->handled = handled;
      continue;
    }
    unsigned fresh = (unsigned)(got - g->seen);
    /* The terminal's receipts reached the program as well while it is in memtap's process group
     * (it stays in memtap's unless it moves itself): such a receipt is not passed on, counted or
     * not. The one way to know it for a program the tracer is not in (one exec'd without
     * LD_PRELOAD, say), which got every Ctrl-C twice. */
    unsigned from_tty = (unsigned)(terminal - g->seen_from_terminal);
    unsigned shared = from_tty && getpgid(child) == getpgrp() ? from_tty : 0;
    unsigned alone = fresh - shared;
    /* The count shows the terminal's deliveries first (they are known to have happened); only
     * what it shows beyond them is evidence for the other receipts, and those it does not show
     * yet are owed. */
    uint32_t shown = counter ? (delivered < shared ? delivered : shared) : 0;
    delivered -= shown;
    /* SIGTSTP: a stop of the program since says it got one; the others it would lose anyway (a
     * stopped process's pending stop signals go when it is continued), and passed on after the
     * job's continuation they would stop it again. */
    if (sig == SIGTSTP && handled != g->handled)
      alone = 0;
    /* Started ignored, it is passed on only once there is a count to read: a program that kept
     * ignoring it loses nothing, and one in which the tracer has not started may have got it
     * already (a terminal's Ctrl-C reaches a script's background jobs too). */
    if (g->found_ignored && !counter)
      delivered = alone;
    if (delivered < alone) {
      if (!g->waiting_since_us)
        g->waiting_since_us = now_us;
      if (now_us - g->waiting_since_us < RECORD_SIGNALS_WAIT_US) {
        waiting = true;
        continue;
      }
      for (unsigned k = delivered; k < alone; k++)
        kill(child, sig);
    }
    g->seen = got;
    g->seen_from_terminal += (sig_atomic_t)from_tty;
    g->owed -= paid;
    if (counter && shared > shown && sig != SIGTSTP) {
      if (!g->owed)
        g->owed_since_us = now_us;
      g->owed += shared - shown;
    }
    g->handled = handled;
    g->waiting_since_us = 0;
  }
  return waiting;
}

void record_signals_restore(record_signals *rs) {
  for (size_t i = 0; i < FORWARDED_COUNT; i++)
    sigaction(forwarded_signals[i], &rs->old_forwarded[i], NULL);
  struct sigaction default_action = {.sa_handler = SIG_DFL};
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < _NSIG; sig++)
    if (rs->passing[sig])
      sigaction(sig, &default_action, NULL);
  sigaction(SIGXFSZ, &rs->old_xfsz, NULL);
  sigaction(SIGCONT, &rs->old_cont, NULL);
}
