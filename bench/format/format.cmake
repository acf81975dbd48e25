add_executable(bench_reader format/bench_reader.c format/bench_floor.c)
target_link_libraries(bench_reader PRIVATE memtap_internal)
# The default trace is found from the project root, wherever the benchmark runs.
target_compile_definitions(bench_reader PRIVATE MEMTAP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
