# src/import: Go execution traces (the alloc/free experiment) into memtrace traces (import.h,
# docs/go.md). Sits on format/ (its input and writer).
add_library(memtap_import OBJECT
  import/go_buffer.c
  import/go_idmap.c
  import/go_events.c
  import/go_batch.c
  import/go_tables.c
  import/go_merge.c
  import/go_heap.c
  import/go_import.c)
list(APPEND MEMTAP_LAYERS memtap_import)
