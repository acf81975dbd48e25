/* memtap ring-dump: prints the records of a ring file (include/memtap/ring.h), one line each, then
 * how many records were lost. Without --follow it prints the records present when it started
 * (mt_cursor_set_end) and stops, however fast the producer writes. With --follow it keeps
 * reading until the producer closes the file or its process is gone, watched through a pidfd so
 * that a killed producer never leaves it hanging. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "memtap/ring.h"
#include "ring/process.h"

static const char usage[] =
    "usage: memtap ring-dump [-f] [-d DIR] PID|FILE\n"
    "\n"
    "Prints every record of a memtap ring file (the shared-memory transport between a traced\n"
    "process and its consumers), one line each, then the number of records lost because the\n"
    "producer overwrote them before they were read. Without --follow, only the records present\n"
    "when ring-dump started are printed. A PID names DIR/PID.memtap-ring.\n"
    "\n"
    "  -f, --follow   keep reading until the producer stops or its process is gone\n"
    "  -d, --dir DIR  where the ring files of processes are (default: $MEMTAP_RING_DIR, else\n"
    "                 $TMPDIR, else /tmp)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Each line: ring, thread generation, sequence number, time in seconds since the file was\n"
    "created, the record. Exit status: 0 read to the end; 1 the file cannot be read or is\n"
    "malformed; 64 bad command line.\n";

struct dump {
  mt_cursor *cursor;
  int64_t created_ns;
};

static void print_escaped(const uint8_t *bytes, size_t length) {
  putchar('"');
  for (size_t i = 0; i < length; i++) {
    uint8_t b = bytes[i];
    if (b == '"' || b == '\\')
      printf("\\%c", b);
    else if (b >= 0x20 && b < 0x7f)
      putchar(b);
    else
      printf("\\x%02x", b);
  }
  putchar('"');
}

static void print_name(const struct dump *d, uint32_t id) {
  const void *name;
  size_t length;
  if (mt_cursor_lookup(d->cursor, MT_RING_REGISTRY_NAME, id, &name, &length) == MT_OK) {
    putchar(' ');
    print_escaped(name, length);
  }
}

static const char *lifecycle_name(uint32_t id) {
  static const char *names[] = {"start",       "stop",       "pause",        "resume",
                                "fork-parent", "fork-child", "thread-start", "thread-exit"};
  return id < sizeof names / sizeof names[0] ? names[id] : "lifecycle?";
}

static int print_event(void *user, const mt_ring_event *ev) {
  const struct dump *d = user;
  /* 128-bit: a damaged file may hold any timestamp. */
  __int128 ns = (__int128)mt_cursor_timestamp_ns(d->cursor, ev->timestamp) - d->created_ns;
  unsigned __int128 magnitude = ns < 0 ? (unsigned __int128)-ns : (unsigned __int128)ns;
  printf("ring %" PRIu32 " gen %" PRIu32 " seq %" PRIu64 " t=%s%llu.%09llu ", ev->ring,
         ev->generation, ev->seq, ns < 0 ? "-" : "", (unsigned long long)(magnitude / 1000000000),
         (unsigned long long)(magnitude % 1000000000));
  const uint64_t *p = ev->payload;
  switch (ev->type) {
  case MT_RING_TYPE_LIFECYCLE:
    fputs(lifecycle_name(ev->id), stdout);
    switch (ev->id) {
    case MT_RING_LIFECYCLE_START: printf(" pid=%" PRIu64, p[0]); break;
    case MT_RING_LIFECYCLE_FORK_PARENT: printf(" fork=%" PRIu64, p[0]); break;
    case MT_RING_LIFECYCLE_FORK_CHILD:
      printf(" parent=%" PRIu64 " fork=%" PRIu64, p[0], p[1]);
      break;
    case MT_RING_LIFECYCLE_THREAD_START:
      printf(" generation=%" PRIu64 " tid=%" PRIu64, p[0], p[1]);
      break;
    case MT_RING_LIFECYCLE_THREAD_EXIT:
      printf(" generation=%" PRIu64 "%s", p[0], p[1] ? " recovered" : "");
      break;
    default: break;
    }
    break;
  case MT_RING_TYPE_CLOCK:
    printf("clock monotonic=%" PRIu64 " realtime=%" PRIu64, p[0], p[1]);
    break;
  case MT_RING_TYPE_COUNTER: printf("counter id=%" PRIu32 " value=%" PRIu64, ev->id, p[0]); break;
  case MT_RING_TYPE_SPAN_BEGIN: printf("span-begin id=%" PRIu32, ev->id); break;
  case MT_RING_TYPE_SPAN_END: printf("span-end id=%" PRIu32, ev->id); break;
  case MT_RING_TYPE_USER_UNIT:
  case MT_RING_TYPE_USER_INT:
  case MT_RING_TYPE_USER_SPAN_BEGIN:
  case MT_RING_TYPE_USER_SPAN_END:
  case MT_RING_TYPE_USER_CUSTOM: {
    static const char *kinds[] = {"user-unit", "user-int", "user-span-begin", "user-span-end",
                                  "user-custom"};
    printf("%s id=%" PRIu32, kinds[ev->type - MT_RING_TYPE_USER_UNIT], ev->id);
    print_name(d, ev->id);
    if (ev->type == MT_RING_TYPE_USER_INT)
      printf(" value=%" PRId64, (int64_t)p[0]);
    if (ev->type == MT_RING_TYPE_USER_CUSTOM) {
      printf(" bytes=");
      print_escaped(ev->bytes, ev->length);
    }
    break;
  }
  default:
    printf("type=%" PRIu32 " id=%" PRIu32 " words=%zu", ev->type, ev->id, ev->words);
    for (size_t i = 0; i < ev->words && i < 8; i++)
      printf(" 0x%" PRIx64, p[i]);
    if (ev->words > 8)
      fputs(" ...", stdout);
    break;
  }
  putchar('\n');
  return MT_CURSOR_NEXT;
}

static void print_lost(void *user, uint32_t ring, uint64_t records) {
  (void)user;
  printf("ring %" PRIu32 " lost %" PRIu64 " records\n", ring, records);
}

static void print_registry(void *user, unsigned kind, uint64_t id, const void *bytes,
                           size_t length) {
  (void)user;
  printf("registry kind=%u id=%" PRIu64 " ", kind, id);
  print_escaped(bytes, length);
  putchar('\n');
}

static bool all_digits(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return false;
  return true;
}

/* Whether the producer can still write: its process exists (the same one: start time checked)
 * and the file at `path` is still the one we read (exec replaces it). `pidfd` becomes readable
 * when the process exits. */
static bool producer_alive(const mt_ring_file_info *info, int pidfd, const char *path,
                           const struct stat *opened) {
  if (pidfd >= 0) {
    struct pollfd p = {pidfd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0)
      return false;
  } else if (!mt_process_alive(info->pid, info->start_time)) {
    return false;
  }
  struct stat now;
  return stat(path, &now) == 0 && now.st_ino == opened->st_ino && now.st_dev == opened->st_dev;
}

static int open_cursor(const char *path, bool follow, mt_cursor **out) {
  mt_error err = {0};
  /* A producer that was just started may still be creating its file: wait a little for it. */
  for (int attempt = 0;; attempt++) {
    int rc = mt_cursor_open_file(out, path, &err);
    if (rc == MT_OK)
      return MT_EXIT_OK;
    bool not_yet = rc == MT_E_STATE || (rc == MT_E_IO && err.sys_errno == ENOENT);
    if (!follow || !not_yet || attempt == 50) {
      cli_report(path, &err);
      return MT_EXIT_FAILURE;
    }
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
}

int mt_cmd_ring_dump(int argc, char **argv) {
  static const struct option options[] = {{"follow", no_argument, NULL, 'f'},
                                          {"dir", required_argument, NULL, 'd'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
  bool follow = false;
  const char *dir = NULL;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "fd:h", options)) != -1) {
    switch (c) {
    case 'f': follow = true; break;
    case 'd': dir = optarg; break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("ring-dump");
    }
  }
  if (optind != argc - 1)
    return cli_usage_error("ring-dump", "expected exactly one PID or FILE");
  const char *target = argv[optind];
  char path[4096];
  long long pid;
  if (all_digits(target)) {
    if (!cli_parse_int(target, 1, 0x7fffffff, &pid))
      return cli_usage_error("ring-dump", "'%s' is not a process id", target);
    if (mt_ring_file_path(path, sizeof path, dir, (int)pid) != MT_OK)
      return cli_usage_error("ring-dump", "directory name too long");
  } else {
    if (strlen(target) >= sizeof path)
      return cli_usage_error("ring-dump", "path too long");
    strcpy(path, target);
  }

  struct dump d = {0};
  int status = open_cursor(path, follow, &d.cursor);
  if (status != MT_EXIT_OK)
    return status;
  mt_ring_file_info info;
  mt_cursor_info(d.cursor, &info);
  d.created_ns = info.created_ns;
  mt_cursor_callbacks cb = {0};
  cb.other = print_event;
  cb.lost = print_lost;
  cb.registry = print_registry;
  mt_cursor_set_callbacks(d.cursor, &cb, &d);
  /* Without --follow, print what is there now and stop: a producer writing flat out would
   * otherwise always have more. */
  if (!follow)
    mt_cursor_set_end(d.cursor);

  struct stat opened = {0};
  stat(path, &opened);
  int pidfd = -1;
  if (follow) {
    pidfd = (int)syscall(SYS_pidfd_open, info.pid, 0);
    uint64_t start;
    /* The pid may name a newer process than the file's producer. */
    if (pidfd >= 0 && (!mt_process_stat(info.pid, &start, NULL) || start != info.start_time)) {
      close(pidfd);
      pidfd = -1;
    }
  }

  mt_error err = {0};
  for (;;) {
    /* Read before polling, so that the last poll sees everything the producer wrote. */
    mt_cursor_info(d.cursor, &info);
    bool finished = !follow || info.stopped || !producer_alive(&info, pidfd, path, &opened);
    size_t got;
    do {
      if (mt_cursor_poll(d.cursor, 65536, &got, &err) != MT_OK) {
        fflush(stdout);
        cli_report(path, &err);
        status = MT_EXIT_FAILURE;
        goto done;
      }
    } while (got);
    if (finished)
      break;
    fflush(stdout);
    if (pidfd >= 0) {
      struct pollfd p = {pidfd, POLLIN, 0};
      poll(&p, 1, 100); /* 10 Hz, or at once when the producer exits */
    } else {
      struct timespec ts = {0, 100000000};
      nanosleep(&ts, NULL);
    }
  }
  printf("lost records: %" PRIu64 "\n", mt_cursor_lost_records(d.cursor));
done:
  if (pidfd >= 0)
    close(pidfd);
  mt_cursor_close(d.cursor);
  return status;
}
