/* libFuzzer target for memtap's command line: the dispatcher (cli/dispatch.c mt_cli_run) and every
 * subcommand's option parsing and error paths, in process, one input per command line.
 *
 * Input: ARG1 \0 ARG2 \0 ... ARGn, then optionally \0\0 FILE. The arguments follow "memtap" as
 * argv[1..n]. An empty argument (two NULs in a row) ends the list, and the bytes after it become
 * the file "t" in the run's directory, so `dump t`, `copy t u` or `top t` read fuzzer-made traces.
 *
 * Each run happens in an empty directory of its own (emptied again after the run), with standard
 * input from /dev/null, standard output (descriptor 1) and the C `stderr` stream going to
 * /dev/null; descriptor 2 stays open for the sanitizers' and libFuzzer's reports. Nothing may
 * crash, hang, leak or touch a file outside that directory.
 *
 * Skipped, so that no input can reach outside the directory or wait on the world: any argument
 * containing '/'; more than MAX_ARGS arguments or one longer than MAX_ARG_LENGTH bytes; ring-dump
 * with --follow (it waits for the producer process to exit): any "--f..." argument, which getopt
 * may take as an abbreviation of --follow, or an 'f' in a group of short options; and commands that
 * run or attach to other programs (record, tap, run), should such commands be added.
 *
 * Run it with absolute paths: the directory changes during each run, and crash artifacts are
 * written then (hence -artifact_prefix):
 *   build-fuzz/tests/fuzz_cli_args -artifact_prefix=$PWD/ -timeout=10 $PWD/new \
 *       $PWD/tests/fuzz/corpus/fuzz_cli_args */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32
#define MAX_ARG_LENGTH 4096
#define MAX_FILE_SIZE (1 << 20)

static int run_dir = -1;  /* where commands run */
static int null_fd = -1;  /* /dev/null, for standard input and output */
static FILE *null_stream; /* stands in for stderr during a run */
static char run_path[4096];

/* Removes everything in the current directory (commands create plain files only). */
static void empty_current_dir(void) {
  DIR *d = opendir(".");
  if (!d)
    abort();
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlink(e->d_name) && rmdir(e->d_name))
      abort(); /* something a command made that this harness cannot clean up: look at it */
  closedir(d);
}

static void remove_run_dir(void) {
  int home = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (home >= 0 && fchdir(run_dir) == 0) {
    empty_current_dir();
    if (fchdir(home) == 0)
      rmdir(run_path);
  }
  if (home >= 0)
    close(home);
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(run_path, sizeof run_path, "%s/memtap-fuzz-cli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(run_path))
    abort();
  run_dir = open(run_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  null_stream = fopen("/dev/null", "w");
  if (run_dir < 0 || null_fd < 0 || !null_stream || dup2(null_fd, STDIN_FILENO) < 0)
    abort();
  /* ring-dump PID looks for the ring file in MEMTAP_RING_DIR: the run's directory. */
  setenv("MEMTAP_RING_DIR", ".", 1);
  atexit(remove_run_dir);
}

/* Whether getopt could read `arg` as ring-dump's --follow (-f). */
static bool may_follow(const char *arg) {
  if (!strncmp(arg, "--f", 3))
    return true;
  return arg[0] == '-' && arg[1] != '-' && strchr(arg, 'f');
}

static bool refused(char **argv, int argc) {
  static const char *const runs_programs[] = {"record", "tap", "run"};
  for (int i = 1; i < argc; i++)
    if (strchr(argv[i], '/'))
      return true;
  if (argc < 2)
    return false;
  for (size_t i = 0; i < sizeof runs_programs / sizeof runs_programs[0]; i++)
    if (!strcmp(argv[1], runs_programs[i]))
      return true;
  if (!strcmp(argv[1], "ring-dump"))
    for (int i = 2; i < argc; i++)
      if (may_follow(argv[i]))
        return true;
  return false;
}

static bool write_file(const char *name, const uint8_t *data, size_t size) {
  int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  bool ok = write(fd, data, size) == (ssize_t)size;
  close(fd);
  return ok;
}

/* Runs `memtap argv...` in the run's directory with the file "t" (when given), quietly; returns
 * the exit status. */
static int run(int argc, char **argv, const uint8_t *file, size_t file_size) {
  int home = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (home < 0 || fchdir(run_dir) != 0)
    abort();
  if (file && !write_file("t", file, file_size))
    abort();
  fflush(stdout);
  int saved_stdout = dup(STDOUT_FILENO);
  if (saved_stdout < 0 || dup2(null_fd, STDOUT_FILENO) < 0)
    abort();
  FILE *saved_stderr = stderr;
  stderr = null_stream;

  int status = mt_cli_run(argc, argv);

  fflush(stdout);
  fflush(stderr);
  stderr = saved_stderr;
  if (dup2(saved_stdout, STDOUT_FILENO) < 0)
    abort();
  close(saved_stdout);
  empty_current_dir();
  if (fchdir(home) != 0)
    abort();
  close(home);
  return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (run_dir < 0)
    setup();
  static char program[] = "memtap";
  char *argv[MAX_ARGS + 2] = {program}; /* NULL-terminated, as main's */
  char *owned[MAX_ARGS + 2] = {0};      /* getopt_long permutes argv: the pointers to free */
  int argc = 1;
  size_t at = 0;
  const uint8_t *file = NULL;
  size_t file_size = 0;
  bool ok = true;
  while (at < size) {
    const uint8_t *nul = memchr(data + at, 0, size - at);
    size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
    if (len == 0) { /* an empty argument ends the list: the rest is the file */
      file = data + at + 1;
      file_size = size - at - 1;
      break;
    }
    /* Each argument in its own allocation, so that reading past its end is caught. */
    if (argc > MAX_ARGS || len > MAX_ARG_LENGTH || !(owned[argc] = malloc(len + 1))) {
      ok = false;
      break;
    }
    memcpy(owned[argc], data + at, len);
    owned[argc][len] = 0;
    argv[argc] = owned[argc];
    argc++;
    at += len + 1;
  }
  if (ok && !refused(argv, argc) && file_size <= MAX_FILE_SIZE) {
    int status = run(argc, argv, file, file_size);
    /* Exit statuses: 0, 1 failure, 2 check's truncated trace, 3 leaks --fail-above, 64 usage. */
    if (!(status >= 0 && status <= 3) && status != MT_EXIT_USAGE)
      abort();
  }
  for (int i = 1; i < argc; i++)
    free(owned[i]);
  return 0;
}
