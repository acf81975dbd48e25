/* Helpers shared by the test programs (testutil.h): testdata lookup with the CI rule (missing data
 * is a failure under CI=true, a skip elsewhere), temporary files, running the CLI, sha256. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tu_testdata_dir(void) {
  const char *dir = getenv("MEMTAP_TESTDATA");
  return dir && *dir ? dir : "../shared/testdata";
}

const char *tu_testdata(const char *relative) {
  static char buffers[8][4096];
  static int next;
  char *path = buffers[next++ % 8];
  snprintf(path, sizeof buffers[0], "%s/%s", tu_testdata_dir(), relative);
  if (access(path, R_OK) != 0) {
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true"))
      fail_msg("test data %s is missing (CI=true: missing data is a failure)", path);
    print_message("skipping: test data %s is missing (set MEMTAP_TESTDATA)\n", path);
    skip();
  }
  return path;
}

uint8_t *tu_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  uint8_t *data = malloc(cap);
  assert_non_null(data);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      data = realloc(data, cap);
      assert_non_null(data);
    }
    size_t n = fread(data + len, 1, cap - len, f);
    if (n == 0)
      break;
    len += n;
  }
  fclose(f);
  data[len] = 0; /* len < cap: a full buffer grows before the next read, and the last found none */
  *size = len;
  return data;
}

void tu_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f)
    fail_msg("cannot create %s: %s", path, strerror(errno));
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

static char temp_dir[4096];

static void remove_temp_dir(void) {
  if (!temp_dir[0] || getenv("MEMTAP_KEEP_TEMP"))
    return;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "warning: could not remove %s\n", temp_dir);
}

const char *tu_temp_dir(void) {
  if (!temp_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/memtap-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(temp_dir))
      fail_msg("mkdtemp: %s", strerror(errno));
    atexit(remove_temp_dir);
  }
  return temp_dir;
}

const char *tu_temp_path(const char *name) {
  static char buffers[8][4096];
  static int next;
  char *path = buffers[next++ % 8];
  snprintf(path, sizeof buffers[0], "%s/%s", tu_temp_dir(), name);
  return path;
}

static char *slurp_fd(int fd, size_t *size) {
  size_t cap = 4096, len = 0;
  char *data = malloc(cap + 1);
  assert_non_null(data);
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      data = realloc(data, cap + 1);
      assert_non_null(data);
    }
    ssize_t n = read(fd, data + len, cap - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  data[len] = 0;
  if (size)
    *size = len;
  return data;
}

/* Runs the CLI with stdout on out_fd and stderr on err_fd, or (err_fd < 0) on a temporary file
 * whose text goes to *err if err is given. */
static int run_cli_argv_to(int out_fd, int err_fd, char **err, const char **args) {
  const char *cli = getenv("MEMTAP_CLI");
  if (!cli || !*cli)
    fail_msg("MEMTAP_CLI is not set (run the tests through ctest)");
  const char *argv[64];
  int argc = 0;
  argv[argc++] = cli;
  for (; *args; args++) {
    assert_true(argc < 63);
    argv[argc++] = *args;
  }
  argv[argc] = NULL;
  bool own_err = err_fd < 0;
  if (own_err) {
    char err_tmpl[] = "/tmp/memtap-cli-err-XXXXXX";
    err_fd = mkstemp(err_tmpl);
    assert_true(err_fd >= 0);
    unlink(err_tmpl);
  }
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    execv(cli, (char *const *)argv);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (own_err) {
    if (err)
      *err = slurp_fd(err_fd, NULL);
    close(err_fd);
  }
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

static int run_cli_argv(int out_fd, char **err, const char **args) {
  return run_cli_argv_to(out_fd, -1, err, args);
}

static void collect_args(const char **args, const char *arg0, va_list ap) {
  int n = 0;
  for (const char *a = arg0; a; a = va_arg(ap, const char *)) {
    assert_true(n < 62);
    args[n++] = a;
  }
  args[n] = NULL;
}

int tu_run_cli(char **out, size_t *out_size, char **err, const char *arg0, ...) {
  const char *args[64];
  va_list ap;
  va_start(ap, arg0);
  collect_args(args, arg0, ap);
  va_end(ap);
  char out_tmpl[] = "/tmp/memtap-cli-out-XXXXXX";
  int out_fd = mkstemp(out_tmpl);
  assert_true(out_fd >= 0);
  unlink(out_tmpl);
  int status = run_cli_argv(out_fd, err, args);
  if (out)
    *out = slurp_fd(out_fd, out_size);
  close(out_fd);
  return status;
}

int tu_run_cli_to_file(const char *out_path, char **err, const char *arg0, ...) {
  const char *args[64];
  va_list ap;
  va_start(ap, arg0);
  collect_args(args, arg0, ap);
  va_end(ap);
  int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out_fd < 0)
    fail_msg("cannot create %s: %s", out_path, strerror(errno));
  int status = run_cli_argv(out_fd, err, args);
  close(out_fd);
  return status;
}

int tu_run_cli_on_terminal(char **out, const char *arg0, ...) {
  const char *args[64];
  va_list ap;
  va_start(ap, arg0);
  collect_args(args, arg0, ap);
  va_end(ap);
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  const char *name = ptsname(master);
  assert_non_null(name);
  int slave = open(name, O_RDWR | O_NOCTTY);
  assert_true(slave >= 0);
  struct termios raw;
  assert_int_equal(tcgetattr(slave, &raw), 0);
  cfmakeraw(&raw); /* bytes as written: no "\n" -> "\r\n" */
  assert_int_equal(tcsetattr(slave, TCSANOW, &raw), 0);
  int status = run_cli_argv_to(slave, slave, NULL, args);
  close(slave);
  /* What the program wrote waits in the terminal's buffer; then reads fail (EIO), or find it
   * empty (EAGAIN). */
  int flags = fcntl(master, F_GETFL);
  fcntl(master, F_SETFL, flags | O_NONBLOCK);
  char *data = slurp_fd(master, NULL);
  close(master);
  *out = data;
  return status;
}

char *tu_ref_field(const char *ref_path, const char *key) {
  size_t size;
  char *text = (char *)tu_read_file(ref_path, &size);
  text = realloc(text, size + 1);
  text[size] = 0;
  size_t klen = strlen(key);
  char *result = NULL;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    if (!strncmp(line, key, klen) && line[klen] == ':') {
      const char *v = line + klen + 1;
      while (*v == ' ')
        v++;
      result = strdup(v);
      break;
    }
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  return result;
}

/* SHA-256 (FIPS 180-4), for comparing dumps with the hashes in the .ref files. */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 =
        k + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
    uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

typedef struct sha256_ctx {
  uint32_t h[8];
  uint8_t block[64];
  size_t fill;
  uint64_t total;
} sha256_ctx;

static void sha_init(sha256_ctx *c) {
  static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, init, sizeof init);
  c->fill = 0;
  c->total = 0;
}

static void sha_update(sha256_ctx *c, const uint8_t *p, size_t n) {
  c->total += n;
  while (n) {
    if (c->fill == 0 && n >= 64) {
      sha_block(c->h, p);
      p += 64;
      n -= 64;
      continue;
    }
    size_t take = 64 - c->fill < n ? 64 - c->fill : n;
    memcpy(c->block + c->fill, p, take);
    c->fill += take;
    p += take;
    n -= take;
    if (c->fill == 64) {
      sha_block(c->h, c->block);
      c->fill = 0;
    }
  }
}

static void sha_final(sha256_ctx *c, char hex[65]) {
  uint64_t bits = c->total * 8;
  uint8_t pad = 0x80, zero = 0, len[8];
  sha_update(c, &pad, 1);
  while (c->fill != 56)
    sha_update(c, &zero, 1);
  for (int i = 0; i < 8; i++)
    len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha_update(c, len, 8);
  for (int i = 0; i < 8; i++)
    snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

void tu_sha256_hex(const void *data, size_t size, char hex[65]) {
  sha256_ctx c;
  sha_init(&c);
  sha_update(&c, data, size);
  sha_final(&c, hex);
}

void tu_sha256_file(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s: %s", path, strerror(errno));
  sha256_ctx c;
  sha_init(&c);
  static uint8_t buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    sha_update(&c, buf, n);
  fclose(f);
  sha_final(&c, hex);
}

/* A strict recursive-descent JSON validator (RFC 8259), for checking --json outputs. */
typedef struct json_cursor {
  const char *p;
  const char *start;
  int depth;
} json_cursor;

static bool json_value(json_cursor *c);

static void json_space(json_cursor *c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
    c->p++;
}

static bool json_string(json_cursor *c) {
  if (*c->p != '"')
    return false;
  c->p++;
  for (;;) {
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') {
      c->p++;
      return true;
    }
    if (ch < 0x20)
      return false;
    if (ch == '\\') {
      c->p++;
      char e = *c->p;
      if (e == 'u') {
        for (int i = 1; i <= 4; i++) {
          char h = c->p[i];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
            return false;
        }
        c->p += 5;
        continue;
      }
      if (!strchr("\"\\/bfnrt", e) || !e)
        return false;
    }
    c->p++;
  }
}

static bool json_number(json_cursor *c) {
  const char *p = c->p;
  if (*p == '-')
    p++;
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (*p >= '0' && *p <= '9')
      p++;
  else
    return false;
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9'))
      return false;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    if (!(*p >= '0' && *p <= '9'))
      return false;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  c->p = p;
  return true;
}

static bool json_value(json_cursor *c) {
  if (++c->depth > 512)
    return false;
  json_space(c);
  bool ok;
  if (*c->p == '{') {
    c->p++;
    json_space(c);
    ok = true;
    if (*c->p == '}') {
      c->p++;
    } else {
      for (;;) {
        json_space(c);
        if (!json_string(c)) {
          ok = false;
          break;
        }
        json_space(c);
        if (*c->p != ':') {
          ok = false;
          break;
        }
        c->p++;
        if (!json_value(c)) {
          ok = false;
          break;
        }
        json_space(c);
        if (*c->p == ',') {
          c->p++;
          continue;
        }
        ok = *c->p == '}';
        if (ok)
          c->p++;
        break;
      }
    }
  } else if (*c->p == '[') {
    c->p++;
    json_space(c);
    ok = true;
    if (*c->p == ']') {
      c->p++;
    } else {
      for (;;) {
        if (!json_value(c)) {
          ok = false;
          break;
        }
        json_space(c);
        if (*c->p == ',') {
          c->p++;
          continue;
        }
        ok = *c->p == ']';
        if (ok)
          c->p++;
        break;
      }
    }
  } else if (*c->p == '"') {
    ok = json_string(c);
  } else if (!strncmp(c->p, "true", 4)) {
    c->p += 4, ok = true;
  } else if (!strncmp(c->p, "false", 5)) {
    c->p += 5, ok = true;
  } else if (!strncmp(c->p, "null", 4)) {
    c->p += 4, ok = true;
  } else {
    ok = json_number(c);
  }
  c->depth--;
  return ok;
}

bool tu_json_valid(const char *text, size_t *error_at) {
  json_cursor c = {text, text, 0};
  bool ok = json_value(&c);
  if (ok) {
    json_space(&c);
    ok = *c.p == 0;
  }
  if (!ok && error_at)
    *error_at = (size_t)(c.p - text);
  return ok;
}

double tu_json_number(const char *json, const char *key) {
  char pattern[256];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *at = strstr(json, pattern);
  if (!at)
    fail_msg("JSON has no field \"%s\": %.200s", key, json);
  return strtod(at + strlen(pattern), NULL);
}
