/* The trace file: an mt_writer on the caller's descriptor, or, with compression, on a memfd whose
 * bytes are moved through a zstd stream to the descriptor after each batch; every periodic flush
 * ends a zstd block so that a reader can decode everything up to it if memtap is killed. The first
 * failure (a full disk, /dev/full, a closed pipe) is kept and writing stops; the recorder goes on
 * draining the rings so the traced program is not held up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "common/error.h"
#include "record/record_internal.h"

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

static bool write_out(rec_output *o, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len) {
    ssize_t n = write(o->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      fail_io(o, "writing the compressed trace");
      return false;
    }
    p += n;
    len -= (size_t)n;
    o->bytes += (uint64_t)n;
  }
  return true;
}

int rec_output_open(rec_output *o, int fd, bool compress, const mt_trace_info *info, int version) {
  o->fd = fd;
  o->compress = compress;
  o->memfd = -1;
  o->start_offset = lseek(fd, 0, SEEK_CUR);
  /* The writer gets a descriptor of its own, so that a recorder abandoned before finishing can
   * point it at /dev/null (rec_output_discard) and close the writer without writing. */
  int target = o->wfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (target < 0) {
    fail_io(o, "duplicating the trace descriptor");
    return o->error.code;
  }
  if (compress) {
    o->memfd = memfd_create("memtap-trace", MFD_CLOEXEC);
    o->zstd = ZSTD_createCCtx();
    if (o->memfd < 0 || !o->zstd) {
      fail_io(o, "setting up compression");
      return o->error.code ? o->error.code : MT_E_NOMEM;
    }
    ZSTD_CCtx_setParameter(o->zstd, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(o->zstd, ZSTD_c_checksumFlag, 1);
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
  if (!o->compress || !o->zstd || o->failed)
    return;
  off_t size = lseek(o->memfd, 0, SEEK_CUR);
  if (size < 0)
    return fail_io(o, "reading the trace buffer");
  uint8_t in[1 << 16], out[1 << 16];
  off_t at = 0;
  ZSTD_EndDirective mode = end ? ZSTD_e_end : flush ? ZSTD_e_flush : ZSTD_e_continue;
  for (;;) {
    ssize_t got = 0;
    if (at < size) {
      got = pread(o->memfd, in, (size_t)(size - at) < sizeof in ? (size_t)(size - at) : sizeof in,
                  at);
      if (got <= 0)
        return fail_io(o, "reading the trace buffer");
      at += got;
    }
    bool last = at >= size;
    ZSTD_inBuffer ib = {in, (size_t)got, 0};
    for (;;) {
      ZSTD_outBuffer ob = {out, sizeof out, 0};
      size_t left = ZSTD_compressStream2(o->zstd, &ob, &ib, last ? mode : ZSTD_e_continue);
      if (ZSTD_isError(left)) {
        mt_error err = {0};
        mt_fail(&err, MT_E_IO, -1, "compressing the trace: %s", ZSTD_getErrorName(left));
        return rec_output_fail(o, &err);
      }
      if (ob.pos && !write_out(o, out, ob.pos))
        return;
      bool done = last && mode != ZSTD_e_continue ? left == 0 : ib.pos == ib.size;
      if (done)
        break;
    }
    if (last)
      break;
  }
  if (ftruncate(o->memfd, 0) || lseek(o->memfd, 0, SEEK_SET) < 0)
    fail_io(o, "resetting the trace buffer");
}

void rec_output_flush(rec_output *o) {
  if (!o->writer || o->failed)
    return;
  mt_error err = {0};
  if (mt_writer_flush(o->writer, &err))
    rec_output_fail(o, &err);
  rec_output_pump(o, true, false);
}

void rec_output_discard(rec_output *o) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0 && o->wfd >= 0)
    dup2(null_fd, o->wfd);
  if (null_fd >= 0 && o->memfd >= 0)
    dup2(null_fd, o->memfd);
  if (null_fd >= 0)
    close(null_fd);
  if (o->writer)
    mt_writer_close(o->writer, NULL);
  o->writer = NULL;
  if (o->zstd)
    ZSTD_freeCCtx(o->zstd);
  o->zstd = NULL;
  if (o->memfd >= 0)
    close(o->memfd);
  if (o->wfd >= 0)
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
  if (!o->compress) {
    off_t end = lseek(o->fd, 0, SEEK_CUR);
    if (end >= 0 && o->start_offset >= 0)
      o->bytes = (uint64_t)(end - o->start_offset);
  }
  if (o->zstd)
    ZSTD_freeCCtx(o->zstd);
  o->zstd = NULL;
  if (o->memfd >= 0)
    close(o->memfd);
  if (o->wfd >= 0)
    close(o->wfd);
  o->memfd = o->wfd = -1;
}
