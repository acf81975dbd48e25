# src/analysis: the streaming analysis model (analysis.h); src/export: what reads it (pprof,
# speedscope, Chrome trace, folded stacks, the HTML report). Both read traces only through the
# reader API (DESIGN.md §2).
add_library(memtap_analysis OBJECT
  analysis/pairmap.c
  analysis/idmap.c
  analysis/stacks.c
  analysis/estimate.c
  analysis/timeline.c
  analysis/cells.c
  analysis/code_trie.c
  analysis/index.c
  analysis/pass.c
  analysis/groups.c
  analysis/frame_keys.c
  analysis/frame_trie.c
  analysis/functions.c
  analysis/callers.c
  analysis/diff.c)
list(APPEND MEMTAP_LAYERS memtap_analysis)

find_package(ZLIB REQUIRED)
set(_report_assets ${CMAKE_CURRENT_BINARY_DIR}/export/report_assets.c)
add_custom_command(
  OUTPUT ${_report_assets}
  COMMAND ${CMAKE_COMMAND} -DOUT=${_report_assets} -DDIR=${CMAKE_CURRENT_SOURCE_DIR}/export/report
          -P ${CMAKE_CURRENT_SOURCE_DIR}/export/embed.cmake
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/export/embed.cmake
          ${CMAKE_CURRENT_SOURCE_DIR}/export/report/report.html
          ${CMAKE_CURRENT_SOURCE_DIR}/export/report/report.css
          ${CMAKE_CURRENT_SOURCE_DIR}/export/report/report.js
  COMMENT "Embedding the HTML report's assets")
add_library(memtap_export OBJECT
  export/common.c
  export/folded.c
  export/flame_svg.c
  export/pprof.c
  export/speedscope.c
  export/chrome.c
  export/html.c
  export/report/name_trie.c
  ${_report_assets})
target_link_libraries(memtap_export PRIVATE ZLIB::ZLIB)
list(APPEND MEMTAP_LAYERS memtap_export)
list(APPEND MEMTAP_LAYER_LIBS ZLIB::ZLIB)
