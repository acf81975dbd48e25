# src/ring: the event transport (docs/ring.md): per-process shared-memory ring files, the
# malloc-free producer and the cursor that consumes them. Depends on common/ only.
add_library(memtap_ring OBJECT
  ring/layout.c
  ring/clock.c
  ring/process.c
  ring/liveness.c
  ring/create.c
  ring/user_dir.c
  ring/thread.c
  ring/give_back.c
  ring/write.c
  ring/registry.c
  ring/producer.c
  ring/consumer.c)
list(APPEND MEMTAP_LAYERS memtap_ring)
