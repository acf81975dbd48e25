/* What the shim reads of an object the loader has in the process (deepbind.c, own_objects.c,
 * modules.c): pointers of its dynamic section, which dl_iterate_phdr entry a link map is, and the
 * span of its segments. */
#ifndef MEMTAP_SRC_TRACER_LOADED_OBJECT_H
#define MEMTAP_SRC_TRACER_LOADED_OBJECT_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A d_ptr of the object loaded at `base`: the loader made most of them absolute, but not in a
 * read-only dynamic section (the vDSO's). */
static inline uintptr_t mt_loaded_dynamic_pointer(ElfW(Addr) base, ElfW(Addr) value) {
  return value < base ? value + base : value;
}

/* Whether the dl_iterate_phdr entry `info` is the object of link map `map`. */
static inline bool mt_loaded_is(const struct dl_phdr_info *info, const struct link_map *map) {
  return info->dlpi_addr == map->l_addr && info->dlpi_name &&
         strcmp(info->dlpi_name, map->l_name ? map->l_name : "") == 0;
}

/* The address span [*low, *high) of the object's loaded segments; *low >= *high when it has
 * none. */
static inline void mt_loaded_span(const struct dl_phdr_info *info, uint64_t *low, uint64_t *high) {
  *low = UINT64_MAX, *high = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    *low = lo < *low ? lo : *low;
    *high = hi > *high ? hi : *high;
  }
}

#endif
