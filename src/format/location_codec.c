/* Location codec (FORMAT.md §2.6): 48-bit packed fields, clamping, MTF encoding and decoding,
 * including the v1 reader quirk (a new file pushed into a full table inherits the evicted file's
 * defname table). */
#include "format/location_codec.h"

#include <stdlib.h>
#include <string.h>

/* --- writer ------------------------------------------------------------------------------- */

static uint64_t clamp(int64_t v, uint64_t max) {
  return v < 0 || (uint64_t)v > max ? max : (uint64_t)v;
}

/* Finds `s` in a string MTF table; on a hit moves it to the front and returns its old index; on a
 * miss pushes a copy at the front (the last entry falls off into *evicted) and returns 31. */
static int mtf_encode(char **text, size_t *len, int *count, const char *s, size_t slen,
                      char **evicted, int *evicted_index, bool *oom) {
  *evicted = NULL;
  for (int i = 0; i < *count; i++) {
    if (len[i] == slen && !memcmp(text[i], s, slen)) {
      char *t = text[i];
      size_t l = len[i];
      memmove(text + 1, text, (size_t)i * sizeof *text);
      memmove(len + 1, len, (size_t)i * sizeof *len);
      text[0] = t;
      len[0] = l;
      *evicted_index = i;
      return i;
    }
  }
  char *copy = malloc(slen + 1);
  if (!copy) {
    *oom = true;
    return MT_MTF_NEW;
  }
  memcpy(copy, s, slen);
  copy[slen] = 0;
  int keep = *count < MT_MTF_SIZE ? *count : MT_MTF_SIZE - 1;
  if (*count == MT_MTF_SIZE)
    *evicted = text[MT_MTF_SIZE - 1];
  memmove(text + 1, text, (size_t)keep * sizeof *text);
  memmove(len + 1, len, (size_t)keep * sizeof *len);
  text[0] = copy;
  len[0] = slen;
  if (*count < MT_MTF_SIZE)
    (*count)++;
  *evicted_index = MT_MTF_NEW;
  return MT_MTF_NEW;
}

static void free_strings(mt_mtf_strings *t) {
  if (!t)
    return;
  for (int i = 0; i < t->count; i++)
    free(t->text[i]);
  free(t);
}

static const mt_location unknown_location = {"<unknown>", "??", 1, 1, 1};

bool mt_location_encode(mt_location_encoder *enc, mt_wbuf *out, uint64_t code,
                        const mt_location *entries, size_t count) {
  size_t worst = 9;
  for (size_t i = 0; i < count; i++)
    worst += 6 + strlen(entries[i].filename ? entries[i].filename : "") + 1 +
             strlen(entries[i].defname ? entries[i].defname : "") + 1;
  if (worst > MT_LOCATION_EVENT_MAX || count > MT_LOCATIONS_MAX) {
    entries = &unknown_location;
    count = 1;
  }
  mt_wbuf_u64(out, code);
  mt_wbuf_u8(out, (uint8_t)count);
  for (size_t i = 0; i < count; i++) {
    const mt_location *l = &entries[i];
    const char *file = l->filename ? l->filename : "";
    const char *def = l->defname ? l->defname : "";
    size_t file_len = strlen(file), def_len = strlen(def);
    bool oom = false;
    char *evicted;
    int moved;
    int file_ix =
        mtf_encode(enc->file, enc->file_len, &enc->count, file, file_len, &evicted, &moved, &oom);
    if (oom)
      return false;
    mt_mtf_strings *defs;
    if (file_ix == MT_MTF_NEW) {
      /* A new file gets a fresh defname table (the v1 writer's inheritance was a bug). */
      free(evicted);
      if (evicted)
        free_strings(enc->defnames[MT_MTF_SIZE - 1]);
      int shift = enc->count - 1;
      memmove(enc->defnames + 1, enc->defnames, (size_t)shift * sizeof *enc->defnames);
      defs = enc->defnames[0] = calloc(1, sizeof *defs);
      if (!defs)
        return false;
    } else {
      defs = enc->defnames[moved];
      memmove(enc->defnames + 1, enc->defnames, (size_t)moved * sizeof *enc->defnames);
      enc->defnames[0] = defs;
    }
    int def_moved;
    int def_ix =
        mtf_encode(defs->text, defs->len, &defs->count, def, def_len, &evicted, &def_moved, &oom);
    free(evicted);
    if (oom)
      return false;
    uint64_t packed = clamp(l->line, 0xFFFFF) | clamp(l->start_char, 0xFF) << 20 |
                      clamp(l->end_char, 0x3FF) << 28 | (uint64_t)file_ix << 38 |
                      (uint64_t)def_ix << 43;
    mt_wbuf_u32(out, (uint32_t)packed);
    mt_wbuf_u16(out, (uint16_t)(packed >> 32));
    if (file_ix == MT_MTF_NEW)
      mt_wbuf_string(out, file, file_len);
    if (def_ix == MT_MTF_NEW)
      mt_wbuf_string(out, def, def_len);
  }
  return true;
}

void mt_location_encoder_free(mt_location_encoder *enc) {
  for (int i = 0; i < enc->count; i++) {
    free(enc->file[i]);
    free_strings(enc->defnames[i]);
  }
  memset(enc, 0, sizeof *enc);
}

/* --- reader ------------------------------------------------------------------------------- */

static const char *mtf_use(const char **names, int index) {
  const char *hit = names[index];
  memmove(names + 1, names, (size_t)index * sizeof *names);
  names[0] = hit;
  return hit;
}

/* A new name (file or function) follows the packed fields: read and intern it. */
static int read_name(mt_rbuf *in, mt_location_table *strings, const char *cut_reason,
                     const char **name, int64_t *bad_offset, const char **reason) {
  int64_t at = mt_rbuf_offset(in);
  const char *s;
  size_t len;
  if (!mt_rbuf_string(in, &s, &len)) {
    *bad_offset = at;
    *reason = cut_reason;
    return MT_E_MALFORMED;
  }
  *name = mt_location_table_intern(strings, s, len);
  return *name ? MT_OK : MT_E_NOMEM;
}

int mt_location_decode(mt_location_decoder *dec, mt_rbuf *in, mt_location_table *strings,
                       unsigned count, mt_location *entries, int64_t *bad_offset,
                       const char **reason) {
  for (unsigned i = 0; i < count; i++) {
    int64_t field = mt_rbuf_offset(in);
    uint32_t low;
    uint16_t high;
    if (!mt_rbuf_u32(in, &low) || !mt_rbuf_u16(in, &high)) {
      *bad_offset = field;
      *reason = "location event ends inside its packed fields";
      return MT_E_MALFORMED;
    }
    uint64_t packed = low | (uint64_t)high << 32;
    mt_location *l = &entries[i];
    l->line = (int32_t)(packed & 0xFFFFF);
    l->start_char = (int32_t)(packed >> 20 & 0xFF);
    l->end_char = (int32_t)(packed >> 28 & 0x3FF);
    unsigned file_ix = packed >> 38 & 31, def_ix = packed >> 43 & 31;

    mt_mtf_names *defs;
    if (file_ix == MT_MTF_NEW) {
      const char *name;
      int rc = read_name(in, strings, "location event ends inside a file name", &name, bad_offset,
                         reason);
      if (rc)
        return rc;
      if (dec->count == MT_MTF_SIZE) {
        /* FORMAT.md §2.6 reader quirk: the new file inherits the evicted file's table. */
        defs = dec->defnames[MT_MTF_SIZE - 1];
      } else {
        defs = calloc(1, sizeof *defs);
        if (!defs)
          return MT_E_NOMEM;
        dec->count++;
      }
      memmove(dec->file + 1, dec->file, (size_t)(dec->count - 1) * sizeof *dec->file);
      memmove(dec->defnames + 1, dec->defnames, (size_t)(dec->count - 1) * sizeof *dec->defnames);
      dec->file[0] = name;
      dec->defnames[0] = defs;
    } else {
      if ((int)file_ix >= dec->count) {
        *bad_offset = field;
        *reason = "location refers to an empty slot of the file move-to-front table";
        return MT_E_MALFORMED;
      }
      defs = dec->defnames[file_ix];
      mtf_use(dec->file, (int)file_ix);
      memmove(dec->defnames + 1, dec->defnames, file_ix * sizeof *dec->defnames);
      dec->defnames[0] = defs;
    }
    l->filename = dec->file[0];

    if (def_ix == MT_MTF_NEW) {
      const char *name;
      int rc = read_name(in, strings, "location event ends inside a function name", &name,
                         bad_offset, reason);
      if (rc)
        return rc;
      int keep = defs->count < MT_MTF_SIZE ? defs->count : MT_MTF_SIZE - 1;
      memmove(defs->name + 1, defs->name, (size_t)keep * sizeof *defs->name);
      defs->name[0] = name;
      if (defs->count < MT_MTF_SIZE)
        defs->count++;
    } else {
      if ((int)def_ix >= defs->count) {
        *bad_offset = field;
        *reason = "location refers to an empty slot of the function move-to-front table";
        return MT_E_MALFORMED;
      }
      mtf_use(defs->name, (int)def_ix);
    }
    l->defname = defs->name[0];
  }
  return MT_OK;
}

void mt_location_decoder_free(mt_location_decoder *dec) {
  for (int i = 0; i < dec->count; i++)
    free(dec->defnames[i]);
  memset(dec, 0, sizeof *dec);
}
