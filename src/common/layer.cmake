# src/common: what every layer shares (status codes, error records). Depends on nothing.
add_library(memtap_common OBJECT common/error.c common/hashmap.c common/indexmap.c common/arena.c
                                 common/bytes.c)
list(APPEND MEMTAP_LAYERS memtap_common)
