/* The location codec (FORMAT.md §2.6): the payload of `location` events, with move-to-front tables
 * of file names and, per file, of function names. One encoder per writer domain, one decoder per
 * reader domain. */
#ifndef MEMTAP_SRC_FORMAT_LOCATION_CODEC_H
#define MEMTAP_SRC_FORMAT_LOCATION_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include "format/buf.h"
#include "format/location_table.h"
#include "memtap/format.h"

#define MT_MTF_SIZE 31
#define MT_MTF_NEW 31
#define MT_LOCATION_EVENT_MAX 4096 /* a location event never exceeds this (§2.6) */
#define MT_LOCATIONS_MAX 255

/* Writer side. Strings are copied: the caller's may not outlive the call. */
typedef struct mt_mtf_strings {
  char *text[MT_MTF_SIZE];
  size_t len[MT_MTF_SIZE];
  int count;
} mt_mtf_strings;

typedef struct mt_location_encoder {
  char *file[MT_MTF_SIZE];
  size_t file_len[MT_MTF_SIZE];
  mt_mtf_strings *defnames[MT_MTF_SIZE];
  int count;
} mt_location_encoder;

/* Appends the payload of one location event (code, count, entries) to `out`, applying the clamping
 * and the "<unknown>" truncation rule and moving the MTF tables. Returns false when memory runs
 * out. */
bool mt_location_encode(mt_location_encoder *enc, mt_wbuf *out, uint64_t code,
                        const mt_location *entries, size_t count);
void mt_location_encoder_free(mt_location_encoder *enc);

/* Reader side: strings are interned in the location table, so the tables hold plain pointers. */
typedef struct mt_mtf_names {
  const char *name[MT_MTF_SIZE];
  int count;
} mt_mtf_names;

typedef struct mt_location_decoder {
  const char *file[MT_MTF_SIZE];
  mt_mtf_names *defnames[MT_MTF_SIZE];
  int count;
} mt_location_decoder;

/* Decodes one location event's entries after its code and count (the caller read those): fills
 * `entries` (room for MT_LOCATIONS_MAX). Returns MT_OK, MT_E_MALFORMED with *bad_offset set and
 * *reason naming the rule, or MT_E_NOMEM. */
int mt_location_decode(mt_location_decoder *dec, mt_rbuf *in, mt_location_table *strings,
                       unsigned count, mt_location *entries, int64_t *bad_offset,
                       const char **reason);
void mt_location_decoder_free(mt_location_decoder *dec);

#endif
