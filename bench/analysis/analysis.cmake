# The analysis benchmark (issue 4): bench_analysis generates a large trace with memtap-gentrace
# (tests/unit/analysis_gentrace.c) and prints times and peak memory. Run it by hand:
#   build/bench/bench_analysis build/memtap build/bench/bench-gentrace ../shared/testdata [NEVENTS]
add_executable(bench_analysis analysis/bench_analysis.c)
target_link_libraries(bench_analysis PRIVATE memtap_internal)
add_executable(bench-gentrace ${PROJECT_SOURCE_DIR}/tests/unit/analysis_gentrace.c)
target_link_libraries(bench-gentrace PRIVATE memtap_internal)
