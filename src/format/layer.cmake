# src/format: the memtrace CTF trace format (FORMAT.md), reader and writer.
add_library(memtap_format OBJECT
  format/buf.c
  format/packet.c
  format/location_codec.c
  format/backtrace_codec.c
  format/location_table.c
  format/input.c
  format/writer.c
  format/reader.c
  format/reader_state.c
  format/reader_backtrace.c
  format/transcode.c)
target_link_libraries(memtap_format PRIVATE PkgConfig::ZSTD)
list(APPEND MEMTAP_LAYERS memtap_format)
