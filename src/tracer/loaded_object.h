/* What the shim reads of an object the loader has in the process (deepbind.c, own_objects.c):
 * pointers of its dynamic section, and which dl_iterate_phdr entry a link map is. */
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

#endif
