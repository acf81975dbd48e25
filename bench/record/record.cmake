# The consumer benchmark (bench/record/README.md): synthetic tracer records through mt_recorder,
# timing the consumer alone. Not a test.
add_executable(bench_record record/bench_record.c)
target_link_libraries(bench_record PRIVATE memtap_internal Threads::Threads)
set_target_properties(bench_record PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                              ${PROJECT_BINARY_DIR}/bench/record)
