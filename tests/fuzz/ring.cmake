# Fuzzing the ring consumer's file parsing (tests/fuzz/fuzz_ring_file.c). Every build replays the
# committed corpus as the CTest test fuzz_replay_ring_file; with MEMTAP_FUZZ=ON (clang) the
# libFuzzer binary fuzz_ring_file is built as well (the top-level build instruments the library).
# Run it under ASan+UBSan:
#   cmake -B build-fuzz-ring -DCMAKE_C_COMPILER=clang -DMEMTAP_FUZZ=ON \
#         -DMEMTAP_SANITIZE=address,undefined
#   build-fuzz-ring/tests/fuzz_ring_file -max_total_time=600 <new corpus dir> tests/fuzz/corpus/ring_file
add_executable(replay_fuzz_ring_file fuzz/fuzz_ring_file.c fuzz/replay_main.c)
target_link_libraries(replay_fuzz_ring_file PRIVATE memtap_internal)
add_test(NAME fuzz_replay_ring_file
         COMMAND replay_fuzz_ring_file ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/ring_file)
set_tests_properties(fuzz_replay_ring_file PROPERTIES LABELS "fuzz;ring")

if(MEMTAP_FUZZ)
  add_executable(fuzz_ring_file fuzz/fuzz_ring_file.c)
  target_link_libraries(fuzz_ring_file PRIVATE memtap_internal)
  target_compile_options(fuzz_ring_file PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_ring_file PRIVATE -fsanitize=fuzzer)
endif()
