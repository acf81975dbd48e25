/* Notes of untraced descendants in memtap record's ring directory (record_untraced.h). */
#include "record_untraced.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "process_program.h"

static const char note_suffix[] = ".untraced";

/* The pid a note's name gives, or 0 if `name` is not `<pid>.untraced` or
 * `<pid>-pidns<namespace>.<start time>.untraced` (a process of another pid namespace: *pidns
 * is a number for the pair, else 0). */
static long note_pid(const char *name, uint64_t *pidns) {
  long pid = 0;
  const char *p = name;
  for (; *p >= '0' && *p <= '9'; p++) {
    pid = pid * 10 + (*p - '0');
    if (pid > 0x7fffffff)
      return 0;
  }
  if (p == name)
    return 0;
  *pidns = 0;
  if (!strncmp(p, "-pidns", 6)) {
    const char *q = p += 6;
    for (; *p >= '0' && *p <= '9' && *pidns < UINT64_MAX / 16; p++)
      *pidns = *pidns * 10 + (uint64_t)(*p - '0');
    if (p == q || !*pidns || *p != '.')
      return 0;
    uint64_t start = 0;
    for (q = ++p; *p >= '0' && *p <= '9' && start < UINT64_MAX / 16; p++)
      start = start * 10 + (uint64_t)(*p - '0');
    if (p == q)
      return 0;
    *pidns = *pidns * 0x9E3779B97F4A7C15u ^ start; /* told apart, not read back */
    *pidns += !*pidns;
  }
  return strcmp(p, note_suffix) == 0 ? pid : 0;
}

bool record_untraced_is_note(const char *name) {
  static const char part[] = ".part";
  size_t n = strlen(name), k = sizeof part - 1;
  if (n > k && strcmp(name + n - k, part) == 0) { /* one the shim was writing */
    char whole[64];
    if (n - k >= sizeof whole)
      return false;
    memcpy(whole, name, n - k);
    whole[n - k] = 0;
    uint64_t pidns;
    return note_pid(whole, &pidns) > 0;
  }
  uint64_t pidns;
  return note_pid(name, &pidns) > 0;
}

/* The index + 1 in u->names of the program name `exe` (a path) is a basename of, added if new;
 * 0 when it cannot be kept. The note is the traced program's to write (it knows the directory),
 * and file names may hold any byte: control characters become '?', so that what is printed
 * cannot drive the user's terminal. */
static uint64_t name_index(record_untraced *u, char *exe) {
  char *slash = strrchr(exe, '/');
  char *base = slash ? slash + 1 : exe;
  if (!*base)
    return 0;
  for (char *c = base; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = '?';
  for (size_t i = 0; i < u->name_count; i++)
    if (strcmp(u->names[i], base) == 0)
      return i + 1;
  if (u->name_count == RECORD_UNTRACED_KEPT)
    return 0;
  if (u->name_count == u->name_cap) {
    size_t cap = u->name_cap ? 2 * u->name_cap : 8;
    char **grown = realloc(u->names, cap * sizeof *grown);
    if (!grown)
      return 0;
    u->names = grown;
    u->name_cap = cap;
  }
  char *copy = strdup(base);
  if (!copy)
    return 0;
  u->names[u->name_count++] = copy;
  return u->name_count;
}

bool record_untraced_take(record_untraced *u, int dir_fd, const char *name) {
  uint64_t pidns = 0;
  long pid = note_pid(name, &pidns);
  if (pid <= 0)
    return false;
  char exe[4096];
  ssize_t n = 0;
  int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    n = read(fd, exe, sizeof exe - 1);
    close(fd);
  }
  /* The shim leaves a long path out (and an empty note is read as such): the process may still be
   * there to ask. */
  bool clone_copy = n > 0 && exe[0] == '+', ring_failed = n > 0 && exe[0] == '!';
  bool misconfigured = n > 0 && exe[0] == '?';
  if (clone_copy || ring_failed || misconfigured)
    memmove(exe, exe + 1, (size_t)--n);
  if (n > 0) {
    exe[n] = 0;
    process_program_undeleted(exe);
  } else if (pidns || !process_program(pid, exe, sizeof exe)) { /* not a pid of ours */
    exe[0] = 0;
  }
  /* Removed before it is counted: a note rewritten meanwhile (the child exec'd) comes back. */
  unlinkat(dir_fd, name, 0);
  if (!u->pids.seed)
    u->pids.seed = mt_hashmap_random_seed(); /* pids are chosen by the program: seeded */
  /* A process by its pid, and one of another namespace by both (pids below 2^22). */
  uint64_t key = (uint64_t)pid ^ pidns << 22, was = 0;
  if (!mt_hashmap_get(&u->pids, key, &was)) {
    u->clones += clone_copy;
    u->ring_failures += ring_failed;
    u->misconfigured += misconfigured;
  }
  uint64_t runs = exe[0] ? name_index(u, exe) : 0;
  mt_hashmap_put(&u->pids, key, runs ? runs : was); /* what it runs now */
  return true;
}

void record_untraced_say(const record_untraced *u, const char *program, const char *output) {
  if (!u->pids.count)
    return;
  const char *slash = strrchr(program, '/');
  /* The programs the processes ran last, in the order first noted. */
  bool *named = u->name_count ? calloc(u->name_count, sizeof *named) : NULL;
  bool unnamed = false;
  for (size_t i = 0; i < u->pids.cap; i++)
    if (u->pids.state[i] == 1) {
      uint64_t name = u->pids.values[i];
      if (name && named)
        named[name - 1] = true;
      else
        unnamed |= name == 0 && u->name_count == RECORD_UNTRACED_KEPT;
    }
  char names[1024] = "";
  size_t used = 0, shown = 0;
  bool more = unnamed;
  for (size_t i = 0; named && i < u->name_count && used < sizeof names; i++) {
    if (!named[i])
      continue;
    if (shown == RECORD_UNTRACED_NAMES) {
      more = true;
      break;
    }
    int w = snprintf(names + used, sizeof names - used, "%s%s", shown ? ", " : "", u->names[i]);
    if (w < 0)
      break;
    used += (size_t)w;
    shown++;
  }
  free(named);
  if (more && shown && used < sizeof names)
    snprintf(names + used, sizeof names - used, ", ...");
  char counted[32];
  fprintf(stderr, "memtap: note: %s process%s that %s started %s not traced%s%s%s",
          out_format_count((double)u->pids.count, counted), u->pids.count == 1 ? "" : "es",
          slash ? slash + 1 : program, u->pids.count == 1 ? "was" : "were", names[0] ? " (" : "",
          names, names[0] ? ")" : "");
  /* Why: --follow-fork, where it would trace them (the plain notes); the clone copies, the
   * children whose ring file could not be made and those whose program set malformed MEMTAP_*,
   * which it cannot. */
  size_t count = u->pids.count, left = count;
  struct {
    size_t n;
    const char *all, *some; /* "it/each "-all when every process, or "N "-some */
  } why[] = {
      {u->clones, "made by the clone system call, which runs no fork handler", NULL},
      {u->ring_failures, "could not make its ring file (a file size, open-file or disk limit?)",
       "that could not make its ring file (a file size, open-file or disk limit?)"},
      {u->misconfigured, "had malformed MEMTAP_* variables, set by its parent program",
       "whose parent program set malformed MEMTAP_* variables"},
  };
  size_t reasons = 0;
  for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
    why[i].n = why[i].n < left ? why[i].n : left;
    left -= why[i].n;
    reasons += why[i].n > 0;
  }
  if (left)
    fprintf(stderr, "; --follow-fork traces each into %s.<pid>%s", output,
            reasons ? ", but for " : "");
  else
    fputs(": ", stderr);
  for (size_t i = 0, said = 0; i < sizeof why / sizeof why[0]; i++) {
    if (!why[i].n)
      continue;
    if (why[i].n == count && !why[i].some) /* a clone copy's reason reads as a whole */
      fputs(why[i].all, stderr);
    else if (why[i].n == count)
      fprintf(stderr, "%s %s", count == 1 ? "it" : "each", why[i].all);
    else
      fprintf(stderr, "%s%s %s", said ? "; " : "", out_format_count((double)why[i].n, counted),
              why[i].some ? why[i].some : why[i].all);
    said++;
  }
  fputc('\n', stderr);
}

void record_untraced_free(record_untraced *u) {
  mt_hashmap_free(&u->pids);
  for (size_t i = 0; i < u->name_count; i++)
    free(u->names[i]);
  free(u->names);
  memset(u, 0, sizeof *u);
}
