/* The producer side of the registry (docs/ring.md §2.4): an append-only log of (kind, id) ->
 * bytes entries in a region that ring wrap-around never overwrites. A writer takes the entry at
 * `registry_used` by a compare-and-swap of its first word from 0 to a RESERVED word that already
 * holds kind and length, then advances `registry_used` past it (any writer that finds the word
 * taken helps with that step, so nobody waits for a writer that was interrupted). It fills the
 * entry, stores the first word without RESERVED, with release, which commits it, and bumps
 * `registry_commits`. A reader can therefore step over an entry still being filled and report
 * the committed ones after it: an entry is never hidden behind another thread's unfinished one.
 * Any thread (or signal handler) may register; nothing allocates. */
#include <string.h>

#include "ring/producer.h"

void (*mt_ring_test_registry_reserved)(void *user);
void *mt_ring_test_registry_reserved_user;

int mt_ring_register(mt_ring *ring, unsigned kind, uint64_t id, const void *bytes, size_t length) {
  struct mt_ring *s = &mt_ring_session;
  if (ring != s || kind == 0 || kind > MT_RING_REGISTRY_MAX_KIND ||
      length > MT_RING_REGISTRY_MAX_BYTES || (length && !bytes))
    return MT_E_INVALID;
  if (mt_ring_writer_epoch(s) & 1)
    return MT_E_STATE;
  mt_ring_file_header *h = s->header;
  uint64_t words = mt_registry_entry_words(length);
  _Atomic uint64_t *reg = mt_ring_registry_at(s->base, &s->geo);
  uint64_t cap = s->geo.registry_words;
  uint64_t reserved = MT_REGISTRY_RESERVED | mt_registry_header_word(kind, length);
  uint64_t used = mt_load_acquire(&h->registry_used);
  for (;;) {
    if (used > cap || words > cap - used)
      return MT_E_NOMEM;
    uint64_t taken = 0;
    if (atomic_compare_exchange_strong(&reg[used], &taken, reserved)) {
      uint64_t expected = used; /* fails only if a helper already moved it */
      atomic_compare_exchange_strong(&h->registry_used, &expected, used + words);
      break;
    }
    /* Another writer reserved this place: move `registry_used` past its entry, then retry. */
    uint64_t its_words = mt_registry_entry_words(taken & 0xffffffffu);
    uint64_t expected = used;
    if (its_words > cap - used)
      return MT_E_NOMEM; /* not an entry of ours: the file was damaged */
    if (atomic_compare_exchange_strong(&h->registry_used, &expected, used + its_words))
      used += its_words;
    else
      used = expected;
  }
  if (mt_ring_test_registry_reserved)
    mt_ring_test_registry_reserved(mt_ring_test_registry_reserved_user);
  _Atomic uint64_t *e = reg + used;
  mt_store_relaxed(&e[1], id);
  const unsigned char *p = bytes;
  for (uint64_t i = 0; i + 2 < words; i++) {
    uint64_t w = 0;
    size_t at = (size_t)i * 8;
    memcpy(&w, p + at, length - at < 8 ? length - at : 8);
    mt_store_relaxed(&e[2 + i], w);
  }
  mt_store_release(&e[0], mt_registry_header_word(kind, length));
  /* After the commit: a reader that sees the count move re-reads the entries it stepped over. */
  atomic_fetch_add_explicit(&h->registry_commits, 1, memory_order_release);
  return MT_OK;
}

int mt_ring_register_name(mt_ring *ring, unsigned id, const char *name) {
  if (!name)
    return MT_E_INVALID;
  return mt_ring_register(ring, MT_RING_REGISTRY_NAME, id, name, strlen(name));
}
