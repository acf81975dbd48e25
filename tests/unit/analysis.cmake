# Tests of the analysis and export layers and of their subcommands (label "analysis"). Traces with
# known event streams are built by the writer at test time (unit/analysis_known_trace.c).
add_library(memtap_analysis_testlib STATIC unit/analysis_known_trace.c)
target_link_libraries(memtap_analysis_testlib PUBLIC memtap_testutil)
target_include_directories(memtap_analysis_testlib PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/unit)

foreach(t test_analysis_model test_analysis_cli test_analysis_export test_analysis_index
          test_analysis_views)
  memtap_unit_test(${t} unit/${t}.c LABELS analysis)
  target_link_libraries(${t} PRIVATE memtap_analysis_testlib)
endforeach()

memtap_unit_test(test_analysis_idmap unit/test_analysis_idmap.c LABELS analysis)
memtap_unit_test(test_analysis_runs unit/test_analysis_runs.c LABELS analysis)
memtap_unit_test(test_common_indexmap unit/test_common_indexmap.c LABELS analysis)
memtap_unit_test(test_common_count_text unit/test_common_count_text.c LABELS analysis)
memtap_unit_test(test_analysis_cells unit/test_analysis_cells.c LABELS analysis)

include(integration/analysis/analysis.cmake OPTIONAL)

# Large traces made at test time (never committed): the memory test, and the benchmark.
add_executable(memtap-gentrace unit/analysis_gentrace.c)
target_link_libraries(memtap-gentrace PRIVATE memtap_internal)

# Peak RSS at 5 M and 50 M events (about 15 s).
memtap_unit_test(test_analysis_memory unit/test_analysis_memory.c LABELS analysis)
target_compile_definitions(test_analysis_memory PRIVATE
                           MEMTAP_GENTRACE="$<TARGET_FILE:memtap-gentrace>")
add_dependencies(test_analysis_memory memtap-gentrace memtap_cli)
set_tests_properties(test_analysis_memory PROPERTIES TIMEOUT 600)
