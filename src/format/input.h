/* Where the reader's bytes come from: a mapped file, memory, a descriptor read in chunks, or any of
 * those through zstd decompression (detected by the zstd magic number). The reader asks for a
 * window of contiguous bytes at the current position; the source keeps it valid until the next
 * call. */
#ifndef MEMTAP_SRC_FORMAT_INPUT_H
#define MEMTAP_SRC_FORMAT_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

typedef struct mt_input mt_input;

int mt_input_open_fd(mt_input **out, int fd, bool own_fd, mt_error *err);
int mt_input_open_memory(mt_input **out, const void *data, size_t size, mt_error *err);
void mt_input_close(mt_input *s);

/* Makes `want` bytes at the current position contiguous and returns a pointer to them; *got is how
 * many are there (less than `want` only at the end of input). Returns NULL with err filled on a
 * read or decompression error. `want` is at most MT_INPUT_WINDOW. */
#define MT_INPUT_WINDOW 65536
const uint8_t *mt_input_peek(mt_input *s, size_t want, size_t *got, mt_error *err);

/* Moves the position forward by `n` bytes, which the last peek returned. */
void mt_input_advance(mt_input *s, size_t n);

/* The current position in the (decompressed) input, and its total size when known (else -1). */
int64_t mt_input_position(const mt_input *s);
int64_t mt_input_size(const mt_input *s);
bool mt_input_compressed(const mt_input *s);
/* The modification time (ns since the epoch) the input's file had when it was mapped; false for
 * input that is not a mapped file (bytes in memory, pipes, streams). */
bool mt_input_file_mtime(const mt_input *s, int64_t *mtime_ns);

/* Whether a zstd input ended inside a frame (the compressed file was cut short): the bytes it
 * gave are good, the rest of the trace is missing. Known once a peek has found the end. */
bool mt_input_cut(const mt_input *s);

/* Whether the whole (uncompressed) input is in memory, so that the position can be set anywhere
 * (mt_input_seek); false for pipes and zstd streams. */
bool mt_input_seekable(const mt_input *s);

/* Moves to `position` (at most the size) of a seekable input. */
void mt_input_seek(mt_input *s, int64_t position);

#endif
