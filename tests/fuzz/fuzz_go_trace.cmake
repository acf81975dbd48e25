# The Go execution-trace import (src/import). As memtap_fuzz_target does, but with the corpus in
# corpus/go_trace; the shared Go testdata traces are replayed too and seed fuzzing runs.
add_executable(replay_fuzz_go_trace fuzz/fuzz_go_trace.c fuzz/replay_main.c)
target_link_libraries(replay_fuzz_go_trace PRIVATE memtap_internal)
add_test(NAME fuzz_replay_fuzz_go_trace
         COMMAND replay_fuzz_go_trace ${MEMTAP_FUZZ_CORPUS}/go_trace ${MEMTAP_TESTDATA_DEFAULT}/go)
set_tests_properties(fuzz_replay_fuzz_go_trace PROPERTIES LABELS "fuzz")
if(MEMTAP_FUZZ)
  add_executable(fuzz_go_trace fuzz/fuzz_go_trace.c)
  target_link_libraries(fuzz_go_trace PRIVATE memtap_internal)
  target_link_options(fuzz_go_trace PRIVATE -fsanitize=fuzzer)
endif()
