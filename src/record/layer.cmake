# src/record: the consumer that turns the tracer's rings into memtrace traces (docs/record.md):
# merge, causal repair, object ids, regions, modules, symbolisation (elfutils libdw), output.
# Sits on ring/ and format/.
find_package(ZLIB REQUIRED) # .gnu_debuglink CRCs (debuginfo.c)
add_library(memtap_record OBJECT
  record/merge.c
  record/order.c
  record/unsettled.c
  record/objects.c
  record/modules.c
  record/sites.c
  record/symbolise.c
  record/scopes.c
  record/debuginfo.c
  record/inflate.c
  record/debug_cache.c
  record/symtab.c
  record/output.c
  record/settings.c
  record/program.c
  record/find_ring.c
  record/recorder.c)
target_link_libraries(memtap_record PRIVATE PkgConfig::LIBDW PkgConfig::ZSTD ZLIB::ZLIB
                                            memtap_libiberty)
list(APPEND MEMTAP_LAYERS memtap_record)
list(APPEND MEMTAP_LAYER_LIBS PkgConfig::LIBDW memtap_libiberty ZLIB::ZLIB ${CMAKE_DL_LIBS})
