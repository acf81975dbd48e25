/* The producer side of the registry (docs/ring.md §2.4): an append-only log of (kind, id) ->
 * bytes entries in a region that ring wrap-around never overwrites. Space is taken with a
 * compare-and-swap on the header's `registry_used`, the entry is filled, and its first word is
 * stored last with release, which commits it. Any thread (or signal handler) may register;
 * nothing allocates. */
#include <string.h>

#include "ring/producer.h"

int mt_ring_register(mt_ring *ring, unsigned kind, uint64_t id, const void *bytes, size_t length) {
  struct mt_ring *s = &mt_ring_session;
  if (ring != s || kind == 0 || kind > MT_RING_REGISTRY_MAX_KIND ||
      length > MT_RING_REGISTRY_MAX_BYTES || (length && !bytes))
    return MT_E_INVALID;
  if (mt_load_acquire(&s->epoch) & 1)
    return MT_E_STATE;
  mt_ring_file_header *h = s->header;
  uint64_t words = mt_registry_entry_words(length);
  uint64_t used = mt_load_relaxed(&h->registry_used);
  do {
    if (used > s->geo.registry_words || words > s->geo.registry_words - used)
      return MT_E_NOMEM;
  } while (!atomic_compare_exchange_weak(&h->registry_used, &used, used + words));
  _Atomic uint64_t *e = mt_ring_registry_at(s->base, &s->geo) + used;
  mt_store_relaxed(&e[1], id);
  const unsigned char *p = bytes;
  for (uint64_t i = 0; i + 2 < words; i++) {
    uint64_t w = 0;
    size_t at = (size_t)i * 8;
    memcpy(&w, p + at, length - at < 8 ? length - at : 8);
    mt_store_relaxed(&e[2 + i], w);
  }
  mt_store_release(&e[0], mt_registry_header_word(kind, length));
  return MT_OK;
}

int mt_ring_register_name(mt_ring *ring, unsigned id, const char *name) {
  if (!name)
    return MT_E_INVALID;
  return mt_ring_register(ring, MT_RING_REGISTRY_NAME, id, name, strlen(name));
}
