/* procs: processes that fork and exec, one pattern per mode (argv[1]); argv[2] is a program to
 * exec (alloc_patterns). The parent's own sites have the same counts in every mode; a forked
 * child allocates at its own line, and is traced only with --follow-fork.
 *   fork        fork; the child allocates and exits; the parent waits
 *   fork-exec   fork; the child allocates, then execs argv[2]
 *   vfork-exec  vfork; the child execs argv[2] at once
 *   spawn       posix_spawn of argv[2]
 *   all         the four above in turn
 *   daemon      double fork: the child forks a grandchild and exits at once; the grandchild,
 *               re-parented, allocates after its parent is gone (argv[2] unused)
 *   clone       glibc's clone() without CLONE_VM (a process that no fork handler sees): the
 *               child allocates while the parent does (argv[2] unused)
 *   raw-clone   the same through the clone system call called directly, as fork does it (the
 *               child goes on from the call on a copy of the stack), which nothing can interpose
 *               (argv[2] unused)
 *   vfork-killed  vfork; the child calls _exit at once (in its parent's memory and thread); the
 *               parent pauses 300 ms and is killed by SIGKILL, without ending as a process that
 *               exits does (argv[2] unused)
 *   clone-vm    2000 children made by clone(CLONE_VM) (the parent's memory and thread state,
 *               running beside it), each calling _exit at once while the parent allocates and
 *               frees 100 blocks (argv[2] unused)
 *   exec-bare   execs argv[2] with an empty environment (no LD_PRELOAD: the tracer does not
 *               start in it)
 *   clearenv    empties its environment (clearenv), then as fork: the child's note must still
 *               reach memtap's ring directory (argv[2] unused)
 *   fork-frees  allocates 10 blocks, forks; the child frees them (blocks its trace never saw
 *               allocated), the parent too (argv[2] unused) */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_program.h"

extern char **environ;

static void parent_work(void) {
  for (int i = 0; i < 10; i++) {
    void *p = malloc(120); // @expect allocs=10 frees=10 words=150
    KEEP(p);
    free(p);
  }
}

static void child_work(void) {
  for (int i = 0; i < 6; i++) {
    void *p = malloc(136); // @expect[child] allocs=6 frees=6 words=102
    KEEP(p);
    free(p);
  }
}

static void daemon_work(void) {
  struct timespec pause = {0, 200 * 1000 * 1000}; /* its parent exits meanwhile */
  nanosleep(&pause, NULL);
  for (int i = 0; i < 3; i++) {
    void *p = malloc(152); // @expect[daemon] allocs=3 frees=3 words=57
    KEEP(p);
    free(p);
  }
}

static int clone_child_work(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000; i++) {
    void *p = malloc(168); // @expect[clone] allocs=20000 frees=20000 words=420000
    KEEP(p);
    free(p);
  }
  return 0;
}

static void clone_parent_work(void) {
  for (int i = 0; i < 20000; i++) {
    void *p = malloc(184); // @expect[clone-parent] allocs=20000 frees=20000 words=460000
    KEEP(p);
    free(p);
  }
}

static void raw_clone_child_work(void) {
  for (int i = 0; i < 20000; i++) {
    void *p = malloc(200); // @expect[raw-clone] allocs=20000 frees=20000 words=500000
    KEEP(p);
    free(p);
  }
}

static int exit_at_once(void *arg) {
  (void)arg;
  _exit(0);
}

static int wait_for(pid_t pid, const char *what) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    printf("%s: failed\n", what);
    return 1;
  }
  printf("%s: exit %d\n", what, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

static int run(const char *mode, char *prog) {
  char *args[] = {prog, NULL};
  fflush(stdout);
  if (strcmp(mode, "fork-frees") == 0) {
    void *blocks[10];
    for (int i = 0; i < 10; i++)
      blocks[i] = malloc(100);
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 10; i++)
        free(blocks[i]);
      _exit(0);
    }
    int rc = wait_for(pid, mode);
    for (int i = 0; i < 10; i++)
      free(blocks[i]);
    return rc;
  }
  if (strcmp(mode, "fork") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      child_work();
      _exit(0);
    }
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "fork-exec") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      child_work();
      execv(prog, args);
      _exit(127);
    }
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "vfork-exec") == 0) {
    pid_t pid = vfork();
    if (pid == 0) {
      execv(prog, args);
      _exit(127);
    }
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "daemon") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      if (fork() == 0) {
        daemon_work();
        _exit(0);
      }
      _exit(0);
    }
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "clone") == 0) {
    static char stack[256 * 1024];
    pid_t pid = clone(clone_child_work, stack + sizeof stack, SIGCHLD, NULL);
    clone_parent_work(); /* at the same time as the child */
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "raw-clone") == 0) {
    pid_t pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0) {
      raw_clone_child_work();
      fflush(stdout);
      _exit(0);
    }
    clone_parent_work(); /* at the same time as the child */
    return wait_for(pid, mode);
  }
  if (strcmp(mode, "vfork-killed") == 0) {
    pid_t pid = vfork();
    if (pid == 0)
      _exit(0);
    wait_for(pid, mode);
    fflush(stdout);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    raise(SIGKILL);
    return 1;
  }
  if (strcmp(mode, "clone-vm") == 0) {
    static char stack[64 * 1024];
    for (int i = 0; i < 2000; i++) {
      pid_t pid = clone(exit_at_once, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL);
      for (int k = 0; k < 100; k++) {
        void *p = malloc(16 + (size_t)k);
        KEEP(p);
        free(p);
      }
      if (pid > 0) /* the stack is free again only once the child is gone */
        waitpid(pid, NULL, 0);
    }
    return 0;
  }
  if (strcmp(mode, "exec-bare") == 0) {
    char *no_environment[] = {NULL};
    execve(prog, args, no_environment);
    perror(prog);
    return 127;
  }
  if (strcmp(mode, "spawn") == 0) {
    pid_t pid = -1;
    if (posix_spawn(&pid, prog, NULL, NULL, args, environ) != 0)
      pid = -1;
    return wait_for(pid, mode);
  }
  fprintf(stderr,
          "usage: procs fork|fork-exec|vfork-exec|spawn|all|daemon|clone|raw-clone|vfork-killed|"
          "clone-vm|exec-bare|clearenv PROGRAM\n");
  return 64;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: procs fork|fork-exec|vfork-exec|spawn|all|daemon|clone|raw-clone|vfork-killed|"
            "clone-vm|exec-bare|clearenv|fork-frees PROGRAM\n");
    return 64;
  }
  parent_work();
  int rc = 0;
  if (strcmp(argv[1], "all") == 0) {
    const char *modes[] = {"fork", "fork-exec", "vfork-exec", "spawn"};
    for (size_t i = 0; i < 4; i++)
      rc |= run(modes[i], argv[2]);
  } else if (strcmp(argv[1], "clearenv") == 0) {
    clearenv();
    rc = run("fork", argv[2]);
  } else {
    rc = run(argv[1], argv[2]);
  }
  printf("procs done\n");
  return rc;
}
