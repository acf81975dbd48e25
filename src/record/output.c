/* The trace file: an mt_writer on the caller's descriptor, or, with compression, on a memfd whose
 * bytes a thread of its own moves through a zstd stream (level 3) to the descriptor, so that
 * compressing overlaps with reading the rings on a second core. Each pump tells the thread how far
 * the writer got; the thread punches out of the memfd what it has compressed, so the buffer
 * stays small, and the pump waits when the thread falls more than COMPRESS_BEHIND bytes behind.
 * Every periodic flush ends a zstd block so that a reader can decode everything up to it if
 * memtap is killed. The first failure (a full disk, /dev/full, a closed pipe) is kept and writing
 * stops; the recorder goes on draining the rings so the traced program is not held up. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "common/error.h"
#include "common/file_size_limit.h"
#include "record/record_internal.h"

#define COMPRESS_LEVEL 3
#define COMPRESS_BEHIND (64u << 20) /* bytes the thread may lag before the writer waits */
#define PUNCH_EVERY (4u << 20)      /* compressed bytes between two hole punches */
#define CHUNK (1u << 17)

struct rec_compressor {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* the thread: more input, a flush or the end */
  pthread_cond_t done; /* the pump: progress */
  int memfd, fd;
  mt_file_identity identity; /* fd's file: compressed bytes go only there */
  ZSTD_CCtx *zstd;
  /* Under the lock. */
  uint64_t avail;    /* bytes of the memfd written by the writer */
  uint64_t consumed; /* bytes compressed */
  uint64_t flush_at; /* make [0, flush_at) decodable */
  uint64_t flushed;  /* [0, flushed) is */
  bool end, ended, discard;
  uint64_t bytes; /* written to fd */
  bool failed;
  mt_error error;
};

void rec_output_fail(rec_output *o, const mt_error *err) {
  if (o->failed)
    return;
  o->failed = true;
  if (err)
    o->error = *err;
}

static void fail_io(rec_output *o, const char *what) {
  mt_error err = {0};
  mt_fail_io(&err, what);
  rec_output_fail(o, &err);
}

/* --- the compressor thread ------------------------------------------------------------------ */

static void thread_fail(rec_compressor *c, int code, const char *what, const char *detail) {
  pthread_mutex_lock(&c->lock);
  if (!c->failed) {
    c->failed = true;
    if (code == MT_E_IO && !detail)
      mt_fail_io(&c->error, what);
    else
      mt_fail(&c->error, code, -1, "%s: %s", what, detail ? detail : "");
  }
  pthread_mutex_unlock(&c->lock);
}

static bool thread_write(rec_compressor *c, const uint8_t *p, size_t len) {
  if (!mt_file_identity_holds(&c->identity, c->fd)) {
    thread_fail(c, MT_E_IO, "the trace's descriptor no longer names the trace file",
                "closed by the program? nothing more is written to it");
    return false;
  }
  if (!mt_file_size_limit_allows(c->fd, len)) {
    thread_fail(c, MT_E_IO, "the trace would grow past the file size limit (ulimit -f)",
                "nothing more is written to it");
    return false;
  }
  while (len) {
    ssize_t n = write(c->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      thread_fail(c, MT_E_IO, "writing the compressed trace", NULL);
      return false;
    }
    p += n;
    len -= (size_t)n;
    pthread_mutex_lock(&c->lock);
    c->bytes += (uint64_t)n;
    pthread_mutex_unlock(&c->lock);
  }
  return true;
}

/* Compresses `len` bytes (mode: continue, flush or end); false once writing failed. */
static bool thread_compress(rec_compressor *c, const uint8_t *data, size_t len,
                            ZSTD_EndDirective mode, uint8_t *out, size_t out_size) {
  ZSTD_inBuffer ib = {data, len, 0};
  for (;;) {
    ZSTD_outBuffer ob = {out, out_size, 0};
    size_t left = ZSTD_compressStream2(c->zstd, &ob, &ib, mode);
    if (ZSTD_isError(left)) {
      thread_fail(c, MT_E_IO, "compressing the trace", ZSTD_getErrorName(left));
      return false;
    }
    if (ob.pos && !thread_write(c, out, ob.pos))
      return false;
    if (mode == ZSTD_e_continue ? ib.pos == ib.size : left == 0)
      return true;
  }
}

static void *compress_thread(void *arg) {
  rec_compressor *c = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL); /* Ctrl-C is the main thread's */
  uint8_t *in = malloc(CHUNK), *out = malloc(ZSTD_CStreamOutSize());
  size_t out_size = ZSTD_CStreamOutSize();
  bool ok = in && out;
  if (!ok)
    thread_fail(c, MT_E_NOMEM, "compressing the trace", "out of memory");
  uint64_t punched = 0;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (!c->discard && c->consumed == c->avail && c->flushed >= c->flush_at && !c->end)
      pthread_cond_wait(&c->wake, &c->lock);
    if (c->discard)
      break;
    uint64_t at = c->consumed, avail = c->avail, flush_at = c->flush_at;
    bool end = c->end;
    pthread_mutex_unlock(&c->lock);
    if (at < avail) {
      size_t n = avail - at < CHUNK ? (size_t)(avail - at) : CHUNK;
      ssize_t got = ok ? pread(c->memfd, in, n, (off_t)at) : (ssize_t)n;
      if (got <= 0) {
        thread_fail(c, MT_E_IO, "reading the trace buffer", NULL);
        ok = false;
        got = (ssize_t)n;
      }
      at += (uint64_t)got;
      /* The last input before a flush point (or the end) carries the directive. */
      ZSTD_EndDirective mode = at == avail && end ? ZSTD_e_end
                               : at == flush_at   ? ZSTD_e_flush
                                                  : ZSTD_e_continue;
      if (ok)
        ok = thread_compress(c, in, (size_t)got, mode, out, out_size);
      if (at - punched >= PUNCH_EVERY) {
        fallocate(c->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)punched,
                  (off_t)(at - punched));
        punched = at;
      }
      pthread_mutex_lock(&c->lock);
      c->consumed = at;
      if (mode != ZSTD_e_continue || !ok)
        c->flushed = at > c->flushed ? at : c->flushed;
      if (mode == ZSTD_e_end)
        c->ended = true;
    } else {
      /* Nothing new: a flush or the end at the point already reached. */
      if (ok)
        ok = thread_compress(c, NULL, 0, end ? ZSTD_e_end : ZSTD_e_flush, out, out_size);
      pthread_mutex_lock(&c->lock);
      c->flushed = at;
      if (end)
        c->ended = true;
    }
    pthread_cond_broadcast(&c->done);
    if (c->ended)
      break;
  }
  c->ended = true;
  pthread_cond_broadcast(&c->done);
  pthread_mutex_unlock(&c->lock);
  free(in);
  free(out);
  return NULL;
}

static rec_compressor *compressor_start(rec_output *o) {
  rec_compressor *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->memfd = o->memfd;
  c->fd = o->fd;
  c->identity = o->identity;
  c->zstd = ZSTD_createCCtx();
  if (!c->zstd) {
    free(c);
    return NULL;
  }
  ZSTD_CCtx_setParameter(c->zstd, ZSTD_c_compressionLevel, o->level ? o->level : COMPRESS_LEVEL);
  ZSTD_CCtx_setParameter(c->zstd, ZSTD_c_checksumFlag, 1);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->wake, NULL);
  pthread_cond_init(&c->done, NULL);
  if (pthread_create(&c->thread, NULL, compress_thread, c)) {
    ZSTD_freeCCtx(c->zstd);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->done);
    free(c);
    return NULL;
  }
  return c;
}

/* Stops the thread (after the end, or discarding what is left) and frees it. */
static void compressor_stop(rec_output *o, bool discard) {
  rec_compressor *c = o->compressor;
  if (!c)
    return;
  pthread_mutex_lock(&c->lock);
  if (discard || c->ended)
    c->discard = true;
  else
    c->end = true; /* a stream the writer never finished: end it where it stands */
  pthread_cond_broadcast(&c->wake);
  pthread_mutex_unlock(&c->lock);
  pthread_join(c->thread, NULL);
  o->bytes = c->bytes;
  if (c->failed && !discard)
    rec_output_fail(o, &c->error);
  ZSTD_freeCCtx(c->zstd);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->wake);
  pthread_cond_destroy(&c->done);
  free(c);
  o->compressor = NULL;
}

/* --- the output --------------------------------------------------------------------------- */

int rec_output_open(rec_output *o, int fd, bool compress, const mt_trace_info *info, int version) {
  o->fd = fd;
  o->compress = compress;
  o->memfd = -1;
  if (!mt_file_identity_holds(&o->identity, fd)) { /* a number the program reused */
    o->wfd = -1;
    o->failed = true;
    mt_fail(&o->error, MT_E_IO, -1,
            "descriptor %d no longer names the trace file (closed by the program?): nothing was "
            "written to it",
            fd);
    return o->error.code;
  }
  /* The writer gets a descriptor of its own, so that a recorder abandoned before finishing can
   * point it at /dev/null (rec_output_discard) and close the writer without writing. */
  o->start_offset = lseek(fd, 0, SEEK_CUR);
  int target = o->wfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (target < 0) {
    fail_io(o, "duplicating the trace descriptor");
    return o->error.code;
  }
  if (!o->identity.known)
    o->identity = mt_file_identity_of(o->wfd);
  if (compress) {
    o->memfd = memfd_create("memtap-trace", MFD_CLOEXEC);
    o->memfd_identity = mt_file_identity_of(o->memfd);
    if (o->memfd < 0 || !(o->compressor = compressor_start(o))) {
      fail_io(o, "setting up compression");
      return o->error.code ? o->error.code : MT_E_NOMEM;
    }
    target = o->memfd;
  }
  mt_writer_options wo = {.version = version};
  mt_error err = {0};
  int rc = mt_writer_create(&o->writer, target, info, &wo, &err);
  if (rc) {
    rec_output_fail(o, &err);
    return rc;
  }
  rec_output_pump(o, false, false);
  return MT_OK;
}

void rec_output_pump(rec_output *o, bool flush, bool end) {
  rec_compressor *c = o->compressor;
  if (!c)
    return;
  off_t size = lseek(o->memfd, 0, SEEK_CUR);
  if (size < 0)
    return fail_io(o, "reading the trace buffer");
  pthread_mutex_lock(&c->lock);
  c->avail = (uint64_t)size;
  if (flush || end)
    c->flush_at = (uint64_t)size;
  if (end)
    c->end = true;
  pthread_cond_broadcast(&c->wake);
  /* Wait for a flush (the file must be readable up to here when we return) and when the thread
   * is far behind (the memfd would grow without bound). */
  while (!c->ended && ((flush || end) ? c->flushed < c->flush_at || (end && !c->ended)
                                      : c->avail - c->consumed > COMPRESS_BEHIND))
    pthread_cond_wait(&c->done, &c->lock);
  o->bytes = c->bytes;
  bool failed = c->failed;
  mt_error error = c->error;
  pthread_mutex_unlock(&c->lock);
  if (failed)
    rec_output_fail(o, &error);
}

void rec_output_flush(rec_output *o) {
  if (!o->writer || o->failed)
    return;
  mt_error err = {0};
  if (mt_writer_flush(o->writer, &err))
    rec_output_fail(o, &err);
  rec_output_pump(o, true, false);
}

/* Whether our descriptor `fd` still names our file: in process, the program may have closed it
 * and reused the number, which must then be neither replaced nor closed. */
static bool ours(const mt_file_identity *id, int fd) {
  return fd >= 0 && mt_file_identity_holds(id, fd);
}

void rec_output_discard(rec_output *o) {
  compressor_stop(o, true);
  bool wfd_ours = ours(&o->identity, o->wfd), memfd_ours = ours(&o->memfd_identity, o->memfd);
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0 && wfd_ours)
    dup2(null_fd, o->wfd);
  if (null_fd >= 0 && memfd_ours)
    dup2(null_fd, o->memfd);
  if (null_fd >= 0)
    close(null_fd);
  if (o->writer)
    mt_writer_close(o->writer, NULL);
  o->writer = NULL;
  if (memfd_ours)
    close(o->memfd);
  if (wfd_ours)
    close(o->wfd);
  o->memfd = o->wfd = -1;
}

void rec_output_close(rec_output *o) {
  if (o->writer) {
    mt_error err = {0};
    if (mt_writer_close(o->writer, &err) && !o->failed)
      rec_output_fail(o, &err);
    o->writer = NULL;
    rec_output_pump(o, true, true);
  }
  compressor_stop(o, false);
  if (!o->compress) {
    off_t end = lseek(o->fd, 0, SEEK_CUR);
    if (end >= 0 && o->start_offset >= 0)
      o->bytes = (uint64_t)(end - o->start_offset);
  }
  if (ours(&o->memfd_identity, o->memfd))
    close(o->memfd);
  if (ours(&o->identity, o->wfd))
    close(o->wfd);
  o->memfd = o->wfd = -1;
}
