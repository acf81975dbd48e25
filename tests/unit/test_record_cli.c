/* `memtap record` refusals and option checks (no shim needed): a missing program, a statically
 * linked one, a set-user-ID copy, a sanitizer build, malformed options and MEMTAP_* variables;
 * none of them leaves a trace behind. With the shim built, /bin/true is traced for real. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record_testlib.h"
#include "testutil.h"

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int record(char **err, const char *output, const char *a, const char *b) {
  return tu_run_cli(NULL, NULL, err, "record", "-o", output, "--", a, b, (char *)NULL);
}

static bool build(const char *source, const char *flags, const char *binary);

static void missing_program_exits_127(void **state) {
  (void)state;
  char *err = NULL;
  const char *out = tu_temp_path("missing.ctf");
  assert_int_equal(record(&err, out, "memtap-no-such-program-xyz", NULL), 127);
  assert_non_null(strstr(err, "command not found"));
  assert_false(exists(out));
  free(err);
  /* A path is not looked up: it is missing, as a shell says, not "not found". */
  assert_int_equal(record(&err, out, "/nonexistent/prog", NULL), 127);
  assert_non_null(strstr(err, "/nonexistent/prog: No such file or directory"));
  free(err);
  assert_int_equal(record(&err, out, "/tmp", NULL), 126);
  assert_non_null(strstr(err, "/tmp: Is a directory"));
  assert_false(exists(out));
  free(err);
  /* A program that exists but whose interpreter or loader does not: exec says ENOENT of it, and
   * "No such file or directory" would name the wrong file. */
  char script[4096];
  snprintf(script, sizeof script, "%s", tu_temp_path("bad-interpreter.sh"));
  const char *text = "#!/nonexistent/interp -x\necho x\n";
  tu_write_file(script, text, strlen(text));
  assert_int_equal(chmod(script, 0755), 0);
  assert_int_equal(record(&err, out, script, NULL), 127);
  assert_non_null(
      strstr(err, "the interpreter its #! line names, /nonexistent/interp, does not exist"));
  assert_false(exists(out));
  free(err);
  char bad_loader[4096];
  snprintf(bad_loader, sizeof bad_loader, "%s", tu_temp_path("bad-loader"));
  assert_true(build("int main(void) { return 0; }\n", "-Wl,--dynamic-linker=/nonexistent/ld.so",
                    bad_loader));
  assert_int_equal(record(&err, out, bad_loader, NULL), 127);
  assert_non_null(strstr(err, "the dynamic loader its ELF header names (PT_INTERP), "
                              "/nonexistent/ld.so, does not exist"));
  free(err);
}

/* Builds `source` with `cc flags`; false when this machine cannot (no static libc, ...). */
static bool build(const char *source, const char *flags, const char *binary) {
  const char *src = tu_temp_path("prog.c");
  tu_write_file(src, source, strlen(source));
  char cmd[32768]; /* flags and paths of up to a few pages each */
  snprintf(cmd, sizeof cmd, "cc %s -o '%s' '%s' 2>/dev/null", flags, binary, src);
  return system(cmd) == 0;
}

/* The trace is created with O_TRUNC: an output that is the program itself (by any path) would
 * destroy it. */
static void output_that_is_the_program_is_refused_and_the_program_kept(void **state) {
  (void)state;
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("copy-of-true"));
  size_t size;
  uint8_t *bytes = tu_read_file("/bin/true", &size);
  tu_write_file(bin, bytes, size);
  assert_int_equal(chmod(bin, 0755), 0);
  char *err = NULL;
  char other_path[4200];
  snprintf(other_path, sizeof other_path, "%s/./copy-of-true", tu_temp_dir());
  assert_int_equal(record(&err, other_path, bin, NULL), 1);
  assert_non_null(strstr(err, "is the program itself"));
  free(err);
  size_t after;
  uint8_t *kept = tu_read_file(bin, &after);
  assert_int_equal(after, size);
  assert_memory_equal(kept, bytes, size);
  free(kept);
  free(bytes);
  /* Nor over one of the program's arguments: it would read the trace, and the file be lost. */
  const char *input = tu_temp_path("input.txt");
  tu_write_file(input, "data\n", 5);
  char *arg_err = NULL;
  assert_int_equal(record(&arg_err, input, "/bin/cat", input), 1);
  assert_non_null(strstr(arg_err, "is the program's argument"));
  size_t arg_kept_size;
  uint8_t *arg_kept = tu_read_file(input, &arg_kept_size);
  assert_int_equal(arg_kept_size, 5);
  assert_memory_equal(arg_kept, "data\n", 5);
  free(arg_kept);
  free(arg_err);
  /* By name too, before the file exists (the trace was written there, and cat printed it). */
  const char *absent = tu_temp_path("not-yet.txt");
  assert_int_equal(record(&arg_err, absent, "/bin/cat", absent), 1);
  assert_non_null(strstr(arg_err, "is the program's argument"));
  assert_int_equal(access(absent, F_OK), -1);
  free(arg_err);
}

static void static_binary_is_refused_with_the_reason(void **state) {
  (void)state;
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("static-prog"));
  if (!build("int main(void) { return 0; }\n", "-static", bin))
    skip();
  char *err = NULL;
  const char *out = tu_temp_path("static.ctf");
  assert_int_equal(record(&err, out, bin, NULL), 1);
  assert_non_null(strstr(err, "statically linked"));
  assert_false(exists(out));
  free(err);
}

/* memtap reads a script's #! interpreter before starting it: one that is a FIFO must not block
 * it (an open that waited for a writer hung memtap record for good). exec says what is wrong. */
static void script_whose_interpreter_is_a_fifo_does_not_hang(void **state) {
  (void)state;
  char fifo[4096], script[4096], text[4200];
  snprintf(fifo, sizeof fifo, "%s", tu_temp_path("interpreter-fifo"));
  snprintf(script, sizeof script, "%s", tu_temp_path("fifo-script"));
  unlink(fifo);
  assert_int_equal(mkfifo(fifo, 0700), 0);
  int n = snprintf(text, sizeof text, "#!%s\n", fifo);
  tu_write_file(script, text, (size_t)n);
  assert_int_equal(chmod(script, 0700), 0);
  char *err = NULL;
  const char *out = tu_temp_path("fifo.ctf");
  int rc = record(&err, out, script, NULL);
  assert_true(rc == 126 || rc == 1);
  assert_non_null(strstr(err, "fifo-script"));
  assert_false(exists(out));
  free(err);
  unlink(fifo);
}

static void setuid_copy_is_refused_with_the_reason(void **state) {
  (void)state;
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("setuid-true"));
  size_t size;
  uint8_t *bytes = tu_read_file("/bin/true", &size);
  tu_write_file(bin, bytes, size);
  free(bytes);
  /* Secure mode needs an owner other than the real user: only root can give the copy one. */
  if (geteuid() != 0)
    skip();
  assert_int_equal(chown(bin, 65534, 65534), 0);
  assert_int_equal(chmod(bin, 04755), 0);
  char *err = NULL;
  const char *out = tu_temp_path("setuid.ctf");
  assert_int_equal(record(&err, out, bin, NULL), 1);
  assert_non_null(strstr(err, "set-user-ID"));
  assert_false(exists(out));
  free(err);
}

static void file_with_capabilities_is_refused_with_the_reason(void **state) {
  (void)state;
  char bin[4096], cmd[8300];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("caps-true"));
  size_t size;
  uint8_t *bytes = tu_read_file("/bin/true", &size);
  tu_write_file(bin, bytes, size);
  free(bytes);
  assert_int_equal(chmod(bin, 0755), 0);
  snprintf(cmd, sizeof cmd, "setcap cap_net_raw+ep '%s' 2>/dev/null", bin);
  if (system(cmd) != 0)
    skip(); /* no setcap, or not allowed to set capabilities here */
  char *err = NULL;
  const char *out = tu_temp_path("caps.ctf");
  assert_int_equal(record(&err, out, bin, NULL), 1);
  assert_non_null(strstr(err, "capabilities"));
  assert_false(exists(out));
  free(err);
}

static void sanitizer_build_is_refused_with_the_reason(void **state) {
  (void)state;
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("asan-prog"));
  if (!build("int main(void) { return 0; }\n", "-fsanitize=address", bin))
    skip();
  char *err = NULL;
  const char *out = tu_temp_path("asan.ctf");
  assert_int_equal(record(&err, out, bin, NULL), 1);
  assert_non_null(strstr(err, "sanitizer"));
  assert_false(exists(out));
  free(err);
}

static void script_is_judged_by_its_interpreter(void **state) {
  (void)state;
  char bin[4096], script[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("static-interp"));
  if (!build("int main(void) { return 0; }\n", "-static", bin))
    skip();
  snprintf(script, sizeof script, "%s", tu_temp_path("script"));
  char text[4200];
  snprintf(text, sizeof text, "#!%s\n", bin);
  tu_write_file(script, text, strlen(text));
  assert_int_equal(chmod(script, 0755), 0);
  char *err = NULL;
  assert_int_equal(record(&err, tu_temp_path("script.ctf"), script, NULL), 1);
  assert_non_null(strstr(err, "statically linked"));
  free(err);
}

static void malformed_options_and_variables_exit_64(void **state) {
  (void)state;
  char *err = NULL;
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", (char *)NULL), 64);
  free(err);
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "record", "--rate", "2", "--", "/bin/true", (char *)NULL), 64);
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--full", "--rate", "0.5", "--",
                              "/bin/true", (char *)NULL),
                   64);
  assert_non_null(strstr(err, "exclude"));
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--sample-interval", "12Q", "--",
                              "/bin/true", (char *)NULL),
                   64);
  free(err);
  /* The same option twice is said to be given twice, not to exclude itself. */
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "record", "--full", "--full", "--", "/bin/true", (char *)NULL),
      64);
  assert_non_null(strstr(err, "--full given twice"));
  free(err);
  /* What the shim would refuse is refused here, before the program runs: a rate under 8 samples
   * per 2^50 bytes, a ring size out of range. */
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "record", "--rate", "1e-15", "--", "/bin/true", (char *)NULL),
      64);
  assert_non_null(strstr(err, "--rate 1e-15"));
  free(err);
  setenv("MEMTAP_RING_SIZE", "1", 1);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--", "/bin/true", (char *)NULL), 64);
  assert_non_null(strstr(err, "MEMTAP_RING_SIZE=1 is not a size from 8K to 1G"));
  free(err);
  unsetenv("MEMTAP_RING_SIZE");
  setenv("MEMTAP_RATE", "banana", 1);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--", "/bin/true", (char *)NULL), 64);
  assert_non_null(strstr(err, "MEMTAP_RATE"));
  free(err);
  unsetenv("MEMTAP_RATE");
  char *out = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, NULL, "record", "--help", (char *)NULL), 0);
  assert_non_null(strstr(out, "--follow-fork"));
  free(out);
}

static bool shim_built(void) {
  const char *cli = getenv("MEMTAP_CLI");
  if (!cli)
    return false;
  char path[4096];
  snprintf(path, sizeof path, "%s", cli);
  char *slash = strrchr(path, '/');
  if (!slash)
    return false;
  strcpy(slash + 1, "libmemtap-preload.so");
  return exists(path);
}

static void true_is_traced_into_a_readable_trace(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *err = NULL;
  const char *out = tu_temp_path("true.ctf");
  /* Written over a longer file: nothing of the old one is left behind the trace. */
  FILE *old = fopen(out, "w");
  assert_non_null(old);
  for (int i = 0; i < 65536; i++)
    fputc(0xff, old);
  fclose(old);
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "record", "--full", "-o", out, "--", "/bin/true", (char *)NULL),
      0);
  assert_non_null(strstr(err, "memtap top"));
  free(err);
  rr_trace t;
  rr_read(out, &t);
  assert_string_equal(mt_reader_info(t.reader)->context, "/bin/true");
  rr_trace_free(&t);
  /* Rate 1 (every word sampled, as memtrace and the analyses read it) records every allocation,
   * as --full: the shim's sampler at rate 1 missed half of a program's 4-byte blocks. */
  const char *every[][2] = {{"--rate", "1"}, {"--sample-interval", "8"}};
  for (size_t i = 0; i < 2; i++) {
    const char *one = tu_temp_path("rate1.ctf");
    assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", every[i][0], every[i][1], "-o", one,
                                "--", "/bin/true", (char *)NULL),
                     0);
    free(err);
    rr_read(one, &t);
    if (!strstr(mt_reader_info(t.reader)->ocaml_runtime_params, ",mode=full"))
      fail_msg("record %s %s: %s", every[i][0], every[i][1],
               mt_reader_info(t.reader)->ocaml_runtime_params);
    rr_trace_free(&t);
  }
  /* The program's exit status is memtap's. */
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "-o", tu_temp_path("false.ctf"), "--",
                              "/bin/false", (char *)NULL),
                   1);
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "-o", tu_temp_path("kill.ctf"), "--",
                              "/bin/sh", "-c", "kill -9 $$", (char *)NULL),
                   128 + 9);
  free(err);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

static void exec_in_the_traced_process_traces_the_final_program(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *err = NULL;
  const char *out = tu_temp_path("exec.ctf");
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--full", "-o", out, "--", "/bin/sh",
                              "-c", "exec /bin/true", (char *)NULL),
                   0);
  free(err);
  rr_trace t;
  rr_read(out, &t);
  /* The shell's events were discarded with its image: the trace describes true. */
  assert_true(ends_with(mt_reader_info(t.reader)->executable_name, "true"));
  rr_trace_free(&t);
}

static void follow_fork_writes_one_trace_per_process_and_lists_them(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *err = NULL;
  const char *out = tu_temp_path("ff.ctf");
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--full", "--follow-fork", "-o", out,
                              "--", "/bin/sh", "-c", "/bin/true; /bin/true; exit 3", (char *)NULL),
                   3);
  /* The shell's trace and one per child, each named on its own closing line. */
  size_t lines = 0;
  for (const char *p = err; (p = strstr(p, "memtap top ")); p++)
    lines++;
  assert_int_equal(lines, 3);
  assert_non_null(strstr(err, out));
  const char *dot = strstr(err, "ff.ctf.");
  assert_non_null(dot);
  char child[4096];
  snprintf(child, sizeof child, "%s/%.*s", tu_temp_dir(), (int)strcspn(dot, ":"), dot);
  rr_trace t;
  rr_read(child, &t);
  assert_true(ends_with(mt_reader_info(t.reader)->executable_name, "true"));
  /* Its own command line, not the shell's that memtap started. */
  assert_string_equal(mt_reader_info(t.reader)->context, "/bin/true");
  rr_trace_free(&t);
  free(err);
}

static void unwritable_trace_lets_the_program_finish_and_fails_after(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "--full", "-o", "/dev/full", "--",
                              "/bin/sh", "-c", "echo finished", (char *)NULL),
                   1);
  assert_string_equal(out, "finished\n");
  assert_non_null(strstr(err, "No space left on device"));
  free(out);
  free(err);
}

static void ctrl_c_reaches_the_program_and_the_trace_is_written(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char out[4096], ready[4096], script[8192];
  snprintf(out, sizeof out, "%s", tu_temp_path("int.ctf"));
  snprintf(ready, sizeof ready, "%s", tu_temp_path("ready"));
  snprintf(script, sizeof script, "trap 'exit 7' INT; touch '%s'; while :; do sleep 0.05; done",
           ready);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0); /* a process group of its own, as a terminal's foreground job */
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 2);
    execl(getenv("MEMTAP_CLI"), "memtap", "record", "-o", out, "--", "/bin/sh", "-c", script,
          (char *)NULL);
    _exit(99);
  }
  setpgid(pid, pid);
  /* Wait for the program to be running (no time limit of our own: ctest's applies). */
  while (access(ready, F_OK) != 0) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(kill(-pid, SIGINT), 0); /* what the terminal does on Ctrl-C */
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 7); /* memtap survived it and exits as the program did */
  rr_trace t;
  rr_read(out, &t);
  rr_trace_free(&t);
}

/* Without "--", the options after the program's name are the program's: `memtap record gcc -o
 * foo foo.c` must not take "-o foo" as the trace's name (it would write the trace over foo). */
static void options_after_the_program_are_the_programs(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *out = NULL, *err = NULL;
  const char *trace = tu_temp_path("echo-args.ctf"), *victim = tu_temp_path("victim");
  tu_write_file(victim, "keep", 4);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "-o", trace, "/bin/echo", "hi", "-o",
                              victim, "--full", (char *)NULL),
                   0);
  char expected[4200];
  snprintf(expected, sizeof expected, "hi -o %s --full\n", victim);
  assert_string_equal(out, expected);
  size_t size;
  uint8_t *kept = tu_read_file(victim, &size);
  assert_int_equal(size, 4);
  assert_memory_equal(kept, "keep", 4);
  free(kept);
  rr_trace t;
  rr_read(trace, &t); /* sampled: the program's --full is not memtap's */
  assert_true(mt_reader_info(t.reader)->sample_rate < 1);
  rr_trace_free(&t);
  free(out);
  free(err);
}

/* A script without "#!" runs through /bin/sh, as execvp and shells run it. */
static void script_without_interpreter_line_runs_through_the_shell(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  const char *script = tu_temp_path("no-shebang.sh");
  const char *text = "echo \"from script: $1\"; exit 3\n";
  tu_write_file(script, text, strlen(text));
  assert_int_equal(chmod(script, 0755), 0);
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "-o", tu_temp_path("no-shebang.ctf"),
                              "--", script, "arg", (char *)NULL),
                   3);
  assert_string_equal(out, "from script: arg\n");
  free(out);
  free(err);
}

/* memtap's standard error a pipe that closes after the program's first line: memtap must not die
 * of SIGPIPE at its closing line; its exit status stays the program's. */
static void closed_pipe_on_stderr_keeps_the_programs_exit_status(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "'%s' record -o '%s' -- /bin/sh -c 'echo line1; sleep 0.2; exit 3' 2>&1 | head -1 "
           ">/dev/null; exit ${PIPESTATUS[0]}",
           getenv("MEMTAP_CLI"), tu_temp_path("pipe.ctf"));
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl("/bin/bash", "bash", "-c", cmd, (char *)NULL);
    _exit(99);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
}

/* Two recorders given one output: the second refuses before running its program, instead of both
 * writing the file. */
static void a_trace_being_written_is_not_written_by_another_recorder(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char trace[4096], ready[4096], marker[4096], script[8192];
  snprintf(trace, sizeof trace, "%s", tu_temp_path("shared.ctf"));
  snprintf(ready, sizeof ready, "%s", tu_temp_path("first-ready"));
  snprintf(marker, sizeof marker, "%s", tu_temp_path("second-ran"));
  snprintf(script, sizeof script, "touch '%s'; sleep 1", ready);
  pid_t first = fork();
  assert_true(first >= 0);
  if (first == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 2);
    execl(getenv("MEMTAP_CLI"), "memtap", "record", "-o", trace, "--", "/bin/sh", "-c", script,
          (char *)NULL);
    _exit(99);
  }
  while (access(ready, F_OK) != 0) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  char *err = NULL;
  assert_int_equal(record(&err, trace, "/usr/bin/touch", marker), 1);
  assert_non_null(strstr(err, "another process is writing it"));
  assert_false(exists(marker));
  free(err);
  int status;
  assert_int_equal(waitpid(first, &status, 0), first);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  rr_trace t;
  rr_read(trace, &t); /* the first recorder's trace, whole */
  rr_trace_free(&t);
}

/* The closing line: a name that needs quoting is quoted in the command it suggests; a device has
 * no size and nothing to look at afterwards; "-o -" is refused (standard output is the
 * program's). */
static void closing_line_quotes_the_trace_and_says_nothing_of_devices(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *err = NULL;
  char odd[4096];
  snprintf(odd, sizeof odd, "%s/it's here.ctf", tu_temp_dir());
  assert_int_equal(record(&err, odd, "/bin/true", NULL), 0);
  char expected[8300];
  snprintf(expected, sizeof expected, "look at it with: memtap top '%s/it'\\''s here.ctf'\n",
           tu_temp_dir());
  if (!strstr(err, expected))
    fail_msg("closing line: %s", err);
  free(err);
  assert_int_equal(record(&err, "/dev/null", "/bin/true", NULL), 0);
  assert_non_null(strstr(err, "memtap: /dev/null: 0 allocations"));
  assert_null(strstr(err, "look at it"));
  assert_null(strstr(err, " B,"));
  free(err);
  assert_int_equal(record(&err, "-", "/bin/true", NULL), 64);
  assert_non_null(strstr(err, "standard output is the program's"));
  assert_false(exists("-"));
  free(err);
  /* The same file by another name (tu_run_cli's standard output and error are files): the trace
   * was written over the program's own output, and the closing line said to look at it there. */
  assert_int_equal(record(&err, "/dev/stdout", "/bin/echo", NULL), 64);
  assert_non_null(strstr(err, "-o /dev/stdout: that is standard output, which the program writes"));
  free(err);
  assert_int_equal(record(&err, "/dev/stderr", "/bin/true", NULL), 64);
  assert_non_null(strstr(err, "-o /dev/stderr: that is standard error"));
  free(err);
  /* --follow-fork names children's traces FILE.PID: /dev/null takes them too (it made regular
   * files /dev/null.PID in /dev), and a pipe, which has no "next to", is refused. */
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--follow-fork", "-o", "/dev/null", "--",
                              "/bin/sh", "-c", "/bin/true; /bin/true", (char *)NULL),
                   0);
  free(err);
  DIR *dev = opendir("/dev");
  assert_non_null(dev);
  for (struct dirent *e; (e = readdir(dev));)
    if (!strncmp(e->d_name, "null.", 5)) {
      unlinkat(dirfd(dev), e->d_name, 0);
      fail_msg("--follow-fork -o /dev/null made /dev/%s", e->d_name);
    }
  closedir(dev);
  char fifo[4096];
  snprintf(fifo, sizeof fifo, "%s/fifo", tu_temp_dir());
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "record", "--follow-fork", "-o", fifo, "--",
                              "/bin/true", (char *)NULL),
                   64);
  assert_non_null(strstr(err, "is not a regular file, and --follow-fork"));
  free(err);
}

/* A program that sets a malformed MEMTAP_* for a child it execs: the child is a descendant memtap
 * does not follow, untraced whatever its variables say, and its shim says nothing into the
 * program's output (it printed "memtap: not tracing: MEMTAP_SAMPLE_INTERVAL=bogus ..."). */
static void unfollowed_child_with_malformed_variables_stays_quiet(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "-o", tu_temp_path("quiet.ctf"), "--",
                              "/bin/sh", "-c", "MEMTAP_SAMPLE_INTERVAL=bogus /bin/true; echo done",
                              (char *)NULL),
                   0);
  assert_string_equal(out, "done\n");
  if (strstr(err, "not tracing"))
    fail_msg("the child's shim spoke: %s", err);
  assert_non_null(strstr(err, "1 process that sh started was not traced (true)"));
  free(out);
  free(err);
}

/* The same with --follow-fork: the child would be traced, but its program set its variables
 * malformed; it stays untraced and quiet, and memtap says why (it printed "memtap: not tracing:"
 * into the program's stderr, and memtap record did not list it). */
static void followed_child_with_malformed_variables_is_listed_not_heard(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "--follow-fork", "-o",
                              tu_temp_path("followed_quiet.ctf"), "--", "/bin/sh", "-c",
                              "MEMTAP_SAMPLE_INTERVAL=bogus /bin/true; echo done", (char *)NULL),
                   0);
  assert_string_equal(out, "done\n");
  if (strstr(err, "not tracing"))
    fail_msg("the child's shim spoke: %s", err);
  assert_non_null(strstr(err, "1 process that sh started was not traced (true): it had malformed "
                              "MEMTAP_* variables, set by its parent program"));
  free(out);
  free(err);
}

/* Without -o the trace is PROGRAM.PID.ctf in the current directory: a program whose name holds
 * a newline or another control character gets '_' in its place. */
static void default_trace_name_has_no_control_characters(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char dir[4096], link[4200], cwd[4096];
  snprintf(dir, sizeof dir, "%s/named", tu_temp_dir());
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(link, sizeof link, "%s/two\nlines\tprog", dir);
  assert_int_equal(symlink("/bin/true", link), 0);
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(dir), 0);
  char *err = NULL;
  int rc = tu_run_cli(NULL, NULL, &err, "record", "--", link, (char *)NULL);
  assert_int_equal(chdir(cwd), 0);
  assert_int_equal(rc, 0);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int traces = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strstr(e->d_name, ".ctf"))
      continue;
    traces++;
    if (strncmp(e->d_name, "two_lines_prog.", 15) != 0)
      fail_msg("trace named '%s'", e->d_name);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  assert_int_equal(traces, 1);
  free(err);
  unlink(link);
  rmdir(dir);
}

/* A followed child whose ring file cannot be made (the program lowered its file size limit below
 * the ring's size before forking) runs untraced, as it would untraced, and memtap says why. */
static void followed_child_without_a_ring_file_is_said(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", tu_temp_path("fsize-fork"));
  if (!build("#include <stdio.h>\n#include <stdlib.h>\n#include <sys/resource.h>\n"
             "#include <sys/wait.h>\n#include <unistd.h>\n"
             "int main(void) {\n"
             "  struct rlimit r = {100000, RLIM_INFINITY};\n"
             "  setrlimit(RLIMIT_FSIZE, &r);\n"
             "  pid_t c = fork();\n"
             "  if (c == 0) { free(malloc(100)); _exit(4); }\n"
             "  int st; waitpid(c, &st, 0);\n"
             "  printf(\"child %d\\n\", WEXITSTATUS(st));\n"
             "  return 0;\n"
             "}\n",
             "", bin))
    skip();
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "record", "--full", "--follow-fork", "-o",
                              tu_temp_path("fsize.ctf"), "--", bin, (char *)NULL),
                   0);
  assert_string_equal(out, "child 4\n");
  if (!strstr(err, "1 process that fsize-fork started was not traced (fsize-fork): it could not "
                   "make its ring file"))
    fail_msg("memtap's note: %s", err);
  free(out);
  free(err);
}

/* A library loaded by a relative path (dlopen("./libplug.so") after a chdir, as LD_LIBRARY_PATH=.
 * does too) has its symbols: memtap finds its absolute path from the process's mappings, though
 * memtap runs in another directory. */
static void library_loaded_by_a_relative_path_has_its_symbols(void **state) {
  (void)state;
  if (!shim_built())
    skip();
  char dir[4096], lib[4200], flags[8400], bin[4200];
  snprintf(dir, sizeof dir, "%s/plugdir", tu_temp_dir());
  mkdir(dir, 0755);
  snprintf(lib, sizeof lib, "%s/libplug.so", dir);
  snprintf(bin, sizeof bin, "%s/dl-relative", dir);
  const char *plug =
      "#include <stdlib.h>\n"
      "void *kept[4];\n"
      "void plug_alloc(void) { for (int i = 0; i < 4; i++) kept[i] = malloc(333); }\n";
  if (!build(plug, "-g -O0 -shared -fPIC", lib))
    skip();
  snprintf(flags, sizeof flags, "-g -O0 -DDIR='\"%s\"' -ldl", dir);
  if (!build("#include <dlfcn.h>\n#include <unistd.h>\n"
             "int main(void) {\n"
             "  if (chdir(DIR)) return 1;\n"
             "  void *h = dlopen(\"./libplug.so\", RTLD_NOW);\n"
             "  if (!h) return 2;\n"
             "  ((void (*)(void))dlsym(h, \"plug_alloc\"))();\n"
             "  usleep(300000); /* alive while memtap reads its registry */\n"
             "  return 0;\n"
             "}\n",
             flags, bin))
    skip();
  const char *trace = tu_temp_path("dl-relative.ctf");
  char *out = NULL, *err = NULL;
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "record", "--full", "-o", trace, "--", bin, (char *)NULL), 0);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "leaks", trace, (char *)NULL), 0);
  if (!strstr(out, "plug_alloc") || strstr(err, "no symbols for ./libplug.so"))
    fail_msg("leaks: %s\nstderr: %s", out, err);
  free(out);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(missing_program_exits_127),
      cmocka_unit_test(output_that_is_the_program_is_refused_and_the_program_kept),
      cmocka_unit_test(static_binary_is_refused_with_the_reason),
      cmocka_unit_test(script_whose_interpreter_is_a_fifo_does_not_hang),
      cmocka_unit_test(setuid_copy_is_refused_with_the_reason),
      cmocka_unit_test(file_with_capabilities_is_refused_with_the_reason),
      cmocka_unit_test(sanitizer_build_is_refused_with_the_reason),
      cmocka_unit_test(script_is_judged_by_its_interpreter),
      cmocka_unit_test(malformed_options_and_variables_exit_64),
      cmocka_unit_test(options_after_the_program_are_the_programs),
      cmocka_unit_test(script_without_interpreter_line_runs_through_the_shell),
      cmocka_unit_test(closed_pipe_on_stderr_keeps_the_programs_exit_status),
      cmocka_unit_test(a_trace_being_written_is_not_written_by_another_recorder),
      cmocka_unit_test(closing_line_quotes_the_trace_and_says_nothing_of_devices),
      cmocka_unit_test(default_trace_name_has_no_control_characters),
      cmocka_unit_test(unfollowed_child_with_malformed_variables_stays_quiet),
      cmocka_unit_test(followed_child_with_malformed_variables_is_listed_not_heard),
      cmocka_unit_test(followed_child_without_a_ring_file_is_said),
      cmocka_unit_test(library_loaded_by_a_relative_path_has_its_symbols),
      cmocka_unit_test(true_is_traced_into_a_readable_trace),
      cmocka_unit_test(exec_in_the_traced_process_traces_the_final_program),
      cmocka_unit_test(follow_fork_writes_one_trace_per_process_and_lists_them),
      cmocka_unit_test(unwritable_trace_lets_the_program_finish_and_fails_after),
      cmocka_unit_test(ctrl_c_reaches_the_program_and_the_trace_is_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
