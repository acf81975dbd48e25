/* dropped: a process started as root that becomes another user, then forks a worker and execs, as
 * servers and launchers (setpriv, runuser) do: `dropped UID HOW`, HOW one of setuid, seteuid,
 * setreuid, setresuid (the call that changes the user). The process allocates, becomes UID (its
 * group too), forks a worker that allocates and exits, then, unless HOW is seteuid (whose real
 * user stays root, so that an exec would be a secure one), execs itself as `dropped UID image`,
 * which allocates. Prints what it became. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_program.h"

static NOINLINE void before_drop(void) {
  for (int i = 0; i < 10; i++) {
    void *p = malloc(120); // @expect[parent] allocs=10 frees=10 words=150
    KEEP(p);
    free(p);
  }
}

static NOINLINE void worker(void) {
  for (int i = 0; i < 30; i++) {
    void *p = malloc(136); // @expect[worker] allocs=30 frees=30 words=510
    KEEP(p);
    free(p);
  }
}

static NOINLINE void image(void) {
  for (int i = 0; i < 40; i++) {
    void *p = malloc(152); // @expect[image] allocs=40 frees=40 words=760
    KEEP(p);
    free(p);
  }
}

/* A line on stdout without stdio's buffer (an allocation at the caller's line). */
static void say(const char *what, int uid) {
  char line[80];
  int n = snprintf(line, sizeof line, "%s %d\n", what, uid);
  if (write(1, line, (size_t)n) != n)
    exit(3);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fputs("usage: dropped UID setuid|seteuid|setreuid|setresuid\n", stderr);
    return 2;
  }
  uid_t uid = (uid_t)atoi(argv[1]);
  const char *how = argv[2];
  if (!strcmp(how, "image")) {
    image();
    say("image as", (int)geteuid());
    return 0;
  }
  before_drop();
  int rc = setgroups(0, NULL) | setgid((gid_t)uid);
  if (!strcmp(how, "setuid"))
    rc |= setuid(uid);
  else if (!strcmp(how, "seteuid"))
    rc |= seteuid(uid);
  else if (!strcmp(how, "setreuid"))
    rc |= setreuid(uid, uid);
  else if (!strcmp(how, "setresuid"))
    rc |= setresuid(uid, uid, uid);
  if (rc || geteuid() != uid) {
    perror("dropped: changing user");
    return 1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    worker();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  say(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "worker ended well as" : "worker failed as",
      (int)uid);
  if (strcmp(how, "seteuid")) {
    execl(argv[0], argv[0], argv[1], "image", (char *)NULL);
    perror("dropped: exec");
    return 1;
  }
  return 0;
}
