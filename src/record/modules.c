/* The traced process's modules (docs/record.md, "Modules"): one instance per serial from the
 * MT_TRACER_REGISTRY_MODULE entries, so that a library unloaded and another loaded at the same
 * address are two instances whose PCs get different codes. Lookup of a PC is a binary search of
 * the loaded instances sorted by address. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
#include "memtap/tracer.h"
#include "record/record_internal.h"

/* Inserts `m` into the sorted live array. */
static bool live_insert(rec_modules *ms, rec_module *m) {
  if (!MT_GROW(ms->live, ms->live_cap, ms->live_count + 1))
    return false;
  size_t i = ms->live_count;
  while (i > 0 && (ms->live[i - 1]->low > m->low ||
                   (ms->live[i - 1]->low == m->low && ms->live[i - 1]->serial > m->serial))) {
    ms->live[i] = ms->live[i - 1];
    i--;
  }
  ms->live[i] = m;
  ms->live_count++;
  return true;
}

static void live_remove(rec_modules *ms, const rec_module *m) {
  for (size_t i = 0; i < ms->live_count; i++)
    if (ms->live[i] == m) {
      memmove(ms->live + i, ms->live + i + 1, (ms->live_count - i - 1) * sizeof *ms->live);
      ms->live_count--;
      return;
    }
}

rec_module *rec_modules_by_serial(const rec_modules *ms, uint64_t serial) {
  uint64_t index;
  if (!mt_hashmap_get(&ms->by_serial, (int64_t)serial, &index))
    return NULL;
  return ms->all[index - 1];
}

int rec_modules_add(rec_modules *ms, uint64_t serial, const void *bytes, size_t length) {
  mt_tracer_module h;
  if (length < sizeof h || serial == 0 || serial >= (1ull << 21))
    return MT_E_MALFORMED;
  memcpy(&h, bytes, sizeof h);
  if ((uint64_t)h.build_id_length + h.path_length > length - sizeof h || h.low > h.high)
    return MT_E_MALFORMED;
  rec_module *m = calloc(1, sizeof *m);
  if (!m)
    return MT_E_NOMEM;
  m->serial = serial;
  m->mapped_fd = -1;
  m->load_bias = h.load_bias;
  m->low = h.low;
  m->high = h.high;
  m->build_id_length = h.build_id_length;
  m->build_id = malloc(h.build_id_length + 1);
  m->path = malloc(h.path_length + 1);
  if (!m->build_id || !m->path) {
    free(m->build_id);
    free(m->path);
    free(m);
    return MT_E_NOMEM;
  }
  const uint8_t *p = (const uint8_t *)bytes + sizeof h;
  memcpy(m->build_id, p, h.build_id_length);
  memcpy(m->path, p + h.build_id_length, h.path_length);
  m->path[h.path_length] = 0;
  rec_module *old = rec_modules_by_serial(ms, serial);
  if (old) { /* a newer description of the same instance */
    live_remove(ms, old);
    old->unloaded = true;
    ms->generation++;
  }
  if (!MT_GROW(ms->all, ms->cap, ms->count + 1) || !live_insert(ms, m)) {
    free(m->build_id);
    free(m->path);
    free(m);
    return MT_E_NOMEM;
  }
  ms->all[ms->count++] = m;
  ms->generation++;
  if (!mt_hashmap_put(&ms->by_serial, (int64_t)serial, ms->count))
    return MT_E_NOMEM;
  return MT_OK;
}

void rec_modules_unload(rec_modules *ms, uint64_t serial) {
  rec_module *m = rec_modules_by_serial(ms, serial);
  if (m && !m->unloaded) {
    m->unloaded = true;
    live_remove(ms, m);
    ms->generation++;
  }
}

rec_module *rec_modules_find(const rec_modules *ms, uint64_t pc) {
  /* The last module starting at or below pc, then back over overlapping ones (an unload still in
   * flight): the oldest instance covering pc wins, since a PC stamped before the unload belongs
   * to it and one after cannot be seen until the unload was applied. */
  size_t lo = 0, hi = ms->live_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ms->live[mid]->low <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  rec_module *best = NULL;
  for (size_t i = lo; i-- > 0;) {
    rec_module *m = ms->live[i];
    if (pc < m->high && (!best || m->serial < best->serial))
      best = m;
    if (lo - i > 8) /* modules do not nest deeper than this */
      break;
  }
  return best;
}

void rec_modules_free(rec_modules *ms) {
  for (size_t i = 0; i < ms->count; i++) {
    if (ms->all[i]->mapped_fd >= 0)
      close(ms->all[i]->mapped_fd);
    free(ms->all[i]->build_id);
    free(ms->all[i]->path);
    free(ms->all[i]);
  }
  free(ms->all);
  free(ms->live);
  mt_hashmap_free(&ms->by_serial);
  memset(ms, 0, sizeof *ms);
}
