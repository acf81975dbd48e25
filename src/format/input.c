/* Input sources for the reader (input.h). Regular files are mapped whole, so the reader decodes
 * straight from the page cache; the pages it has gone past are released as it goes, so that the
 * mapping does not make a reader's resident memory grow with the file. Pipes and zstd streams go
 * through a buffer that is compacted when the reader's window would cross its end. */
#include "format/input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "common/error.h"

#define BUFFER_SIZE (4 * MT_INPUT_WINDOW)
/* A mapped file's pages more than this far behind the position are released, this many at once.
 * Nothing the reader keeps points into the mapping (strings are interned, backtraces copied), and
 * a released page is read again from the file if the position moves back (a checkpoint). */
#define RELEASE_STEP ((size_t)4 << 20)
#define ZSTD_MAGIC 0xFD2FB528u
/* What zstd first takes of a frame: its magic and descriptor byte, which say how long the rest of
 * its header is. */
#define ZSTD_FRAME_START 5

struct mt_input {
  /* Whole input in memory (mapped or given). */
  const uint8_t *data;
  size_t size;
  void *mapping;
  size_t mapping_size;
  size_t released;  /* mapped bytes before this are released */
  int64_t mtime_ns; /* the mapped file's modification time, when mapped */
  /* Streaming input. */
  int fd;
  bool own_fd;
  bool eof;        /* the descriptor is exhausted */
  uint8_t *buffer; /* decoded bytes [start, end) are valid */
  size_t start, end;
  /* Compressed input: raw bytes read from fd or memory feed the decompressor. */
  ZSTD_DStream *zstd;
  uint8_t *raw;
  ZSTD_inBuffer in;
  size_t raw_cap;
  int64_t raw_before; /* compressed bytes of the descriptor read before `raw`'s current contents */
  /* The decompressor's last hint: the compressed bytes of its next step (the rest of a frame
   * header, or a block and the header of the next); 0 at a frame's start, the first one's or once
   * a frame is whole and flushed. */
  size_t zstd_left;
  int64_t zstd_step; /* where in the compressed input the decompressor's current step began */
  bool zstd_cut;     /* the compressed input ended inside a frame */
  int64_t position;
};

/* Whether the input starts with a zstd frame. A skippable one (magic 0x184D2A50 to 0x184D2A5F,
 * metadata or padding that tools and pipelines may put first) counts: the decompressor skips it,
 * wherever it is in the stream. */
static bool is_zstd(const uint8_t *p, size_t n) {
  if (n < 4)
    return false;
  uint32_t magic = (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24);
  return magic == ZSTD_MAGIC || (magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

static int start_zstd(mt_input *s, mt_error *err) {
  s->zstd = ZSTD_createDStream();
  s->buffer = malloc(BUFFER_SIZE);
  if (!s->zstd || !s->buffer)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory setting up zstd decompression");
  ZSTD_initDStream(s->zstd);
  return MT_OK;
}

/* Bytes all in memory (given, or a mapped file): read directly, or decompressed through the
 * buffer when they are a zstd stream. Closes `s` on failure. */
static int use_bytes(mt_input *s, const void *data, size_t size, mt_input **out, mt_error *err) {
  if (is_zstd(data, size)) {
    s->in = (ZSTD_inBuffer){data, size, 0};
    int rc = start_zstd(s, err);
    if (rc) {
      mt_input_close(s);
      return rc;
    }
  } else {
    s->data = data;
    s->size = size;
  }
  *out = s;
  return MT_OK;
}

int mt_input_open_memory(mt_input **out, const void *data, size_t size, mt_error *err) {
  mt_input *s = calloc(1, sizeof *s);
  if (!s)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  s->fd = -1;
  return use_bytes(s, data, size, out, err);
}

static ssize_t read_some(int fd, void *buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r >= 0 || errno != EINTR)
      return r;
  }
}

int mt_input_open_fd(mt_input **out, int fd, bool own_fd, mt_error *err) {
  mt_input *s = calloc(1, sizeof *s);
  if (!s)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  s->fd = fd;
  s->own_fd = own_fd;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && lseek(fd, 0, SEEK_CUR) == 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
      s->mapping = m;
      s->mapping_size = (size_t)st.st_size;
      s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
      return use_bytes(s, m, s->mapping_size, out, err);
    }
  }
  /* A pipe, or a file we could not map: read it in chunks. Peek at the magic first. */
  s->buffer = malloc(BUFFER_SIZE);
  if (!s->buffer) {
    mt_input_close(s);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  while (s->end < 4 && !s->eof) {
    ssize_t r = read_some(fd, s->buffer + s->end, BUFFER_SIZE - s->end);
    if (r < 0) {
      int rc = mt_fail_io(err, "read");
      mt_input_close(s);
      return rc;
    }
    if (r == 0)
      s->eof = true;
    s->end += (size_t)r;
  }
  if (is_zstd(s->buffer, s->end)) {
    /* What was read so far is compressed input. */
    s->raw_cap = MT_INPUT_WINDOW;
    s->raw = malloc(s->raw_cap);
    s->zstd = ZSTD_createDStream();
    if (!s->raw || !s->zstd) {
      mt_input_close(s);
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    }
    ZSTD_initDStream(s->zstd);
    memcpy(s->raw, s->buffer, s->end);
    s->in = (ZSTD_inBuffer){s->raw, s->end, 0};
    s->end = 0;
  }
  *out = s;
  return MT_OK;
}

void mt_input_close(mt_input *s) {
  if (!s)
    return;
  if (s->mapping)
    munmap(s->mapping, s->mapping_size);
  if (s->own_fd && s->fd >= 0)
    close(s->fd);
  free(s->buffer);
  free(s->raw);
  ZSTD_freeDStream(s->zstd);
  free(s);
}

/* What is wrong with a .zst file that zstd refused, in the file's terms rather than zstd's own
 * ("Destination buffer is too small"); `magic` is the 4 bytes where a frame should start, when
 * known (else -1). */
static const char *zstd_damage(size_t code, int64_t magic, char *text, size_t size) {
  switch (ZSTD_getErrorCode(code)) {
  case ZSTD_error_prefix_unknown:
    if (magic < 0)
      return "what follows a zstd frame is not one";
    snprintf(text, size, "what follows a zstd frame is not one: magic 0x%08x, expected 0x%08x",
             (unsigned)magic, ZSTD_MAGIC);
    return text;
  case ZSTD_error_version_unsupported:
  case ZSTD_error_frameParameter_unsupported:
    return "the zstd frame header has a reserved bit set or an unknown version";
  case ZSTD_error_frameParameter_windowTooLarge:
    return "the zstd frame header asks for a window over 128 MiB, more than memtap allows";
  case ZSTD_error_dictionary_wrong:
  case ZSTD_error_dictionary_corrupted:
    return "the zstd frame needs a dictionary, which memtap does not take";
  case ZSTD_error_checksum_wrong: return "the zstd frame's checksum does not match its data";
  case ZSTD_error_dstSize_tooSmall:
    return "the zstd frame holds more data than its header declares";
  case ZSTD_error_corruption_detected:
  case ZSTD_error_literals_headerWrong:
  case ZSTD_error_tableLog_tooLarge:
  case ZSTD_error_maxSymbolValue_tooLarge:
  case ZSTD_error_maxSymbolValue_tooSmall:
  case ZSTD_error_srcSize_wrong: return "the compressed data is corrupt";
  default:
    snprintf(text, size, "the compressed data is corrupt: %s", ZSTD_getErrorName(code));
    return text;
  }
}

/* A failed step of the decompressor over `in`, the part of s->in it was given. Offsets in the
 * trace count decompressed bytes; the message places the damage in the .zst file too, at the
 * step's first byte (zstd reports no finer position). */
static int zstd_failure(mt_input *s, size_t code, const ZSTD_inBuffer *in, mt_error *err) {
  if (ZSTD_getErrorCode(code) == ZSTD_error_memory_allocation)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory decompressing the trace");
  int64_t produced = s->position + (int64_t)(s->end - s->start);
  int64_t given = s->raw_before + (int64_t)s->in.pos; /* where `in` starts in the file */
  int64_t last = given + (int64_t)in->size - 1;
  const uint8_t *p = in->src;
  int64_t magic = s->zstd_step == given && in->size >= 4
                      ? (int64_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24)
                      : -1;
  char text[160];
  return mt_fail(err, MT_E_MALFORMED, produced,
                 "malformed compressed trace at byte %lld: %s (in bytes %lld to %lld; the "
                 "decompressed trace ends at byte %lld)",
                 (long long)s->zstd_step, zstd_damage(code, magic, text, sizeof text),
                 (long long)s->zstd_step, (long long)(last > s->zstd_step ? last : s->zstd_step),
                 (long long)produced);
}

/* Streaming: refill the buffer until it holds `want` bytes from `start`, or the input ends. */
static int fill(mt_input *s, size_t want, mt_error *err) {
  if (s->end - s->start >= want)
    return MT_OK;
  if (BUFFER_SIZE - s->start < want) {
    memmove(s->buffer, s->buffer + s->start, s->end - s->start);
    s->end -= s->start;
    s->start = 0;
  }
  while (s->end - s->start < want) {
    if (!s->zstd) {
      if (s->eof)
        return MT_OK;
      ssize_t r = read_some(s->fd, s->buffer + s->end, BUFFER_SIZE - s->end);
      if (r < 0)
        return mt_fail_io(err, "read");
      if (r == 0)
        s->eof = true;
      s->end += (size_t)r;
      continue;
    }
    bool no_more_input = false;
    if (s->in.pos == s->in.size) {
      if (s->fd < 0 || s->mapping || s->eof) {
        no_more_input = true;
      } else {
        ssize_t r = read_some(s->fd, s->raw, s->raw_cap);
        if (r < 0)
          return mt_fail_io(err, "read");
        if (r == 0) {
          s->eof = true;
          no_more_input = true;
        } else {
          s->raw_before += (int64_t)s->in.size;
          s->in = (ZSTD_inBuffer){s->raw, (size_t)r, 0};
        }
      }
    }
    /* With all its input taken, the decompressor may still hold decoded bytes that did not fit
     * the buffer: they are flushed before the end is declared. A frame still unfinished then
     * (a .zst file cut short, even by its checksum alone) is a cut input (mt_input_cut). */
    if (no_more_input && s->zstd_left == 0)
      return MT_OK;
    /* The decompressor is given one step at a time (what its hint asks for: the rest of a frame
     * header, or a block and the next one's header), so that damage is placed at the start of
     * the step that met it, not anywhere in all the input it could have taken at once. */
    size_t step = s->zstd_left ? s->zstd_left : ZSTD_FRAME_START;
    size_t left = s->in.size - s->in.pos;
    ZSTD_inBuffer in = {(const uint8_t *)s->in.src + s->in.pos, step < left ? step : left, 0};
    size_t before = s->end;
    ZSTD_outBuffer o = {s->buffer, BUFFER_SIZE, s->end};
    size_t rc = ZSTD_decompressStream(s->zstd, &o, &in);
    if (ZSTD_isError(rc))
      return zstd_failure(s, rc, &in, err);
    s->in.pos += in.pos;
    /* A hinted step all taken is done; a frame's first bytes are not a step of their own (the
     * header they start is). */
    if (s->zstd_left && in.pos == s->zstd_left)
      s->zstd_step = s->raw_before + (int64_t)s->in.pos;
    s->end = o.pos;
    s->zstd_left = rc;
    if (no_more_input && o.pos == before) {
      s->zstd_cut = rc != 0;
      return MT_OK;
    }
  }
  return MT_OK;
}

bool mt_input_cut(const mt_input *s) {
  return s->zstd_cut;
}

const uint8_t *mt_input_peek(mt_input *s, size_t want, size_t *got, mt_error *err) {
  if (s->data) {
    size_t left = s->size - (size_t)s->position;
    *got = left < want ? left : want;
    return s->data + s->position;
  }
  if (fill(s, want, err))
    return NULL;
  size_t left = s->end - s->start;
  *got = left < want ? left : want;
  return s->buffer + s->start;
}

void mt_input_advance(mt_input *s, size_t n) {
  if (!s->data)
    s->start += n;
  s->position += (int64_t)n;
  /* Only when the mapping is the trace itself: over a .zst file, position counts decompressed
   * bytes, and releasing that far would reach past the compressed mapping into other memory. */
  if (s->mapping && s->data && (size_t)s->position >= s->released + 2 * RELEASE_STEP) {
    size_t upto = (size_t)s->position - RELEASE_STEP;
    upto -= upto % RELEASE_STEP; /* page-aligned: the step is a multiple of any page size */
    madvise((uint8_t *)s->mapping + s->released, upto - s->released, MADV_DONTNEED);
    s->released = upto;
  }
}

int64_t mt_input_position(const mt_input *s) {
  return s->position;
}

int64_t mt_input_size(const mt_input *s) {
  return s->data ? (int64_t)s->size : -1;
}

bool mt_input_file_mtime(const mt_input *s, int64_t *mtime_ns) {
  *mtime_ns = s->mtime_ns;
  return s->mapping != NULL;
}

bool mt_input_compressed(const mt_input *s) {
  return s->zstd != NULL;
}

bool mt_input_seekable(const mt_input *s) {
  return s->data != NULL;
}

void mt_input_seek(mt_input *s, int64_t position) {
  if (s->data && position >= 0 && (uint64_t)position <= s->size) {
    s->position = position;
    if ((size_t)position < s->released)
      s->released = (size_t)position - (size_t)position % RELEASE_STEP;
  }
}
