/* Location codes of return addresses (contract.md "Codes"): (module serial << 40) | (pc - 1 -
 * load_bias), pc - 1 landing inside the call instruction, so a code names one instruction of one
 * module instance; a PC in no module gets a synthetic code of its own. The innermost frames that
 * are allocator wrappers (operator new and its variants) are dropped here, so that the top site of
 * a C++ program is the user's call to new. A stack's codes are cached while the modules stay the
 * same, so a stack met again is not converted again. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "record/record_internal.h"

static uint64_t synthetic_code(rec_sites *s, uint64_t pc) {
  uint64_t code;
  if (mt_hashmap_get(&s->unknown_pcs, (int64_t)pc, &code))
    return code;
  if (!MT_GROW(s->unknown_by_index, s->unknown_cap, s->unknown_count + 1))
    return 0;
  code = REC_CODE_SYNTHETIC + 1 + s->unknown_count;
  if (!mt_hashmap_put(&s->unknown_pcs, (int64_t)pc, code))
    return 0;
  s->unknown_by_index[s->unknown_count++] = pc;
  return code;
}

bool rec_sites_synthetic_pc(const rec_sites *s, uint64_t code, uint64_t *pc) {
  if (code < REC_CODE_SYNTHETIC || code == REC_CODE_THREAD_STACK || code == REC_CODE_START_UP)
    return false;
  uint64_t index = code - REC_CODE_SYNTHETIC;
  if (index == 0) {
    *pc = 0;
    return true;
  }
  if (index > s->unknown_count)
    return false;
  *pc = s->unknown_by_index[index - 1];
  return true;
}

static bool is_wrapper(rec_sites *s, rec_symboliser *sym, rec_module *m, uint64_t code,
                       uint64_t vaddr) {
  uint64_t known;
  if (mt_hashmap_get(&s->wrapper, (int64_t)code, &known))
    return known == 2;
  bool wrapper = sym && rec_symboliser_is_wrapper(sym, m, vaddr);
  mt_hashmap_put(&s->wrapper, (int64_t)code, wrapper ? 2 : 1);
  return wrapper;
}

long rec_sites_codes(rec_sites *s, const rec_modules *ms, rec_symboliser *sym,
                     const uint64_t *frames, uint32_t nframes, bool truncated, uint64_t *codes) {
  long n = 0;
  bool innermost = true;
  for (uint32_t i = 0; i < nframes; i++) {
    uint64_t pc = frames[i];
    rec_module *m = pc ? rec_modules_find(ms, pc - 1) : NULL;
    uint64_t code;
    if (m && pc - 1 - m->load_bias < (1ull << 40)) {
      uint64_t vaddr = pc - 1 - m->load_bias;
      code = m->serial << 40 | vaddr;
      if (innermost && is_wrapper(s, sym, m, code, vaddr))
        continue;
    } else {
      code = synthetic_code(s, pc);
      if (!code)
        return -1;
    }
    innermost = false;
    codes[n++] = code;
  }
  if (truncated)
    codes[n++] = REC_CODE_TRUNCATED;
  return n;
}

long rec_sites_lookup_codes(rec_sites *s, const rec_modules *ms, rec_symboliser *sym,
                            const uint64_t *frames, uint32_t nframes, uint32_t hash,
                            uint64_t serial, bool truncated, const uint64_t **codes) {
  uint64_t generation = ms->generation + 1; /* never 0 */
  s->last_serial = 0;
  if (!s->stacks && !(s->stacks = calloc(REC_STACK_CACHE, sizeof *s->stacks)))
    return -1;
  rec_stack_entry *e = &s->stacks[hash & (REC_STACK_CACHE - 1)];
  if (e->generation == generation && e->hash == hash && e->nframes == nframes &&
      e->truncated == truncated &&
      (!nframes || !memcmp(e->frames, frames, nframes * sizeof *frames))) {
    s->last = e;
    s->last_serial = serial;
    *codes = e->frames + nframes;
    return e->ncodes;
  }
  size_t need = 2 * (size_t)nframes + 1;
  if (e->cap < need) {
    uint64_t *grown = realloc(e->frames, need * sizeof *grown);
    if (!grown)
      return -1;
    e->frames = grown;
    e->cap = need;
  }
  e->generation = 0;
  long n = rec_sites_codes(s, ms, sym, frames, nframes, truncated, e->frames + nframes);
  if (n < 0)
    return -1;
  if (nframes)
    memcpy(e->frames, frames, nframes * sizeof *frames);
  e->generation = generation;
  e->hash = hash;
  e->nframes = nframes;
  e->truncated = truncated;
  e->ncodes = (uint32_t)n;
  s->last = e;
  s->last_serial = serial;
  *codes = e->frames + nframes;
  return n;
}

void rec_sites_free(rec_sites *s) {
  if (s->stacks)
    for (size_t i = 0; i < REC_STACK_CACHE; i++)
      free(s->stacks[i].frames);
  free(s->stacks);
  free(s->scratch);
  mt_hashmap_free(&s->unknown_pcs);
  mt_hashmap_free(&s->wrapper);
  free(s->unknown_by_index);
  memset(s, 0, sizeof *s);
}
