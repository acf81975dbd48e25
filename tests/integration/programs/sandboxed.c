/* sandboxed: a program that sandboxes itself with seccomp, as daemons and browsers do: 1000
 * allocations, then a filter whose default action kills the process at any system call not on its
 * short list (installed through prctl or through the seccomp system call, `sandboxed
 * prctl|syscall`; `sandboxed errno`: one that makes any other call fail with EPERM instead, as
 * container runtimes' do), then threads that allocate, a fork child that allocates and a large
 * block (mmap). It prints what it computed and exits 0; killed, it prints nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_program.h"

/* Its own system calls, and glibc's for threads, fork, and large blocks. */
static const int allowed[] = {SYS_read,
                              SYS_write,
                              SYS_exit,
                              SYS_exit_group,
                              SYS_brk,
                              SYS_mmap,
                              SYS_munmap,
                              SYS_mprotect,
                              SYS_madvise,
                              SYS_futex,
                              SYS_clone,
                              SYS_clone3,
                              SYS_rt_sigprocmask,
                              SYS_set_robust_list,
                              SYS_rseq,
                              SYS_sched_yield,
                              SYS_nanosleep,
                              SYS_clock_nanosleep,
                              SYS_getrandom,
                              SYS_mremap,
                              SYS_gettid,
                              SYS_rt_sigreturn,
                              SYS_clock_gettime,
                              SYS_newfstatat,
                              SYS_fstat,
                              SYS_getpid,
                              SYS_rt_sigaction,
                              SYS_sigaltstack,
                              SYS_wait4,
                              SYS_exit};

static void *worker(void *arg) {
  long sum = (long)(intptr_t)arg;
  for (int i = 0; i < 20000; i++) {
    char *p = malloc(100 + (size_t)(i % 5000));
    KEEP(p);
    p[0] = (char)i;
    sum += p[0];
    free(p);
  }
  return (void *)(intptr_t)sum;
}

int main(int argc, char **argv) {
  if (argc != 2 ||
      (strcmp(argv[1], "prctl") && strcmp(argv[1], "syscall") && strcmp(argv[1], "errno"))) {
    fprintf(stderr, "usage: sandboxed prctl|syscall|errno\n");
    return 2;
  }
  for (int i = 0; i < 1000; i++) {
    void *p = malloc((size_t)i * 10);
    KEEP(p);
    free(p);
  }
  struct sock_filter filter[64];
  int n = 0, count = (int)(sizeof allowed / sizeof allowed[0]);
  filter[n++] =
      (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (int i = 0; i < count; i++)
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allowed[i],
                                               (unsigned char)(count - i), 0);
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, strcmp(argv[1], "errno")
                                                                  ? SECCOMP_RET_KILL_PROCESS
                                                                  : SECCOMP_RET_ERRNO | EPERM);
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog program = {.len = (unsigned short)n, .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
    perror("PR_SET_NO_NEW_PRIVS");
    return 2;
  }
  int rc = strcmp(argv[1], "prctl")
               ? (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program)
               : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
  if (rc) {
    perror("seccomp");
    return 2;
  }
  long total = 0;
  for (int k = 0; k < 4; k++) {
    pthread_t t;
    void *result;
    if (pthread_create(&t, NULL, worker, (void *)(intptr_t)k) || pthread_join(t, &result))
      return 3;
    total += (long)(intptr_t)result;
  }
  pid_t child = fork();
  if (child == 0)
    _exit(worker(NULL) != NULL ? 0 : 1);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
    return 4;
  char *big = malloc(50 << 20);
  memset(big, 1, 50 << 20);
  total += big[12345];
  free(big);
  char line[128];
  int length =
      snprintf(line, sizeof line, "sandboxed: total %ld, child %d\n", total, WEXITSTATUS(status));
  return write(1, line, (size_t)length) == length ? 0 : 5;
}
