# Fuzzing. With MEMTAP_FUZZ=ON (clang), each target is a libFuzzer binary; in every build, CTest
# replays the committed corpus (plus the shared testdata for the reader) through the same target.
set(MEMTAP_FUZZ_CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)

# memtap_fuzz_target(NAME source.c SEEDS dir...): the libFuzzer binary and the replay test.
function(memtap_fuzz_target name source)
  cmake_parse_arguments(F "" "" "SEEDS" ${ARGN})
  add_executable(replay_${name} ${source} fuzz/replay_main.c)
  target_link_libraries(replay_${name} PRIVATE memtap_internal)
  add_test(NAME fuzz_replay_${name} COMMAND replay_${name} ${MEMTAP_FUZZ_CORPUS}/${name} ${F_SEEDS})
  set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS "fuzz")
  if(MEMTAP_FUZZ)
    add_executable(${name} ${source})
    target_link_libraries(${name} PRIVATE memtap_internal)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()

memtap_fuzz_target(fuzz_reader fuzz/fuzz_reader.c SEEDS ${MEMTAP_TESTDATA_DEFAULT}/memtrace)
# The analyses and exports over what the reader accepts (fuzz_analysis.c); any trace is a seed.
memtap_fuzz_target(fuzz_analysis fuzz/fuzz_analysis.c SEEDS ${MEMTAP_TESTDATA_DEFAULT}/memtrace)
include(fuzz/ring.cmake OPTIONAL)

# The command line, in process (tests/fuzz/fuzz_cli_args.c: argv from the input, run in an empty
# directory of its own), and the environment variables the ring layer reads (fuzz_env.c).
memtap_fuzz_target(fuzz_cli_args fuzz/fuzz_cli_args.c)
target_link_libraries(replay_fuzz_cli_args PRIVATE memtap_cli_lib)
if(MEMTAP_FUZZ)
  target_link_libraries(fuzz_cli_args PRIVATE memtap_cli_lib)
endif()
memtap_fuzz_target(fuzz_env fuzz/fuzz_env.c)
# MEMTAP_RING_TSC_ANCHOR, which the shim reads at start (ring/clock.c).
memtap_fuzz_target(fuzz_clock_anchor fuzz/fuzz_clock_anchor.c)

# The checkpoint index (TRACE.idx) and the reader's saved state inside it.
memtap_fuzz_target(fuzz_index fuzz/fuzz_index.c)

# The tracer's environment variables (src/tracer/config.c), as the shim and `memtap record` read
# them.
if(TARGET memtap_tracer_pure)
  memtap_fuzz_target(fuzz_tracer_env fuzz/fuzz_tracer_env.c)
  target_link_libraries(replay_fuzz_tracer_env PRIVATE memtap_tracer_pure)
  if(MEMTAP_FUZZ)
    target_link_libraries(fuzz_tracer_env PRIVATE memtap_tracer_pure)
  endif()
endif()

# The consumer of the tracer's rings (src/record): ring files in memory through a recorder, the
# trace read back (fuzz_record.c); seeds are small ring files written by the real producer.
memtap_fuzz_target(fuzz_record fuzz/fuzz_record.c)
# The causal repair alone, fed histories with expiries between them (fuzz_order.c).
memtap_fuzz_target(fuzz_order fuzz/fuzz_order.c)
# Separate debug files as the symboliser inflates them for libdw (src/record/inflate.c).
memtap_fuzz_target(fuzz_inflate fuzz/fuzz_inflate.c)
# A program file as memtap record reads it before starting it (src/record/program.c).
memtap_fuzz_target(fuzz_program fuzz/fuzz_program.c)
# The shim's reader of modules' unwind tables (src/tracer/eh_frame.c), compiled in here as the
# unit tests compile it.
memtap_fuzz_target(fuzz_eh_frame fuzz/fuzz_eh_frame.c)
target_sources(replay_fuzz_eh_frame PRIVATE ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c)
target_include_directories(replay_fuzz_eh_frame PRIVATE ${PROJECT_SOURCE_DIR}/src)
if(MEMTAP_FUZZ)
  target_sources(fuzz_eh_frame PRIVATE ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c)
  target_include_directories(fuzz_eh_frame PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()
include(fuzz/fuzz_go_trace.cmake OPTIONAL)
