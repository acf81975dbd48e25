# Tests of the shim's cached CFI unwinder (src/tracer/eh_frame.c, unwind_cfi.c) against libunwind
# (label "tracer"). The unwinder's sources are compiled into the test itself: the shim links them
# privately, they are not part of libmemtap. The workloads are built -O2 without frame pointers,
# as Debian builds its binaries, and the C++ part throws exceptions through compared frames.
enable_language(CXX)

memtap_unit_test(test_tracer_unwind_cfi unit/test_tracer_unwind_cfi.c LABELS tracer tsan)
target_sources(test_tracer_unwind_cfi PRIVATE unit/tracer_unwind_cxx.cpp
               ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c
               ${PROJECT_SOURCE_DIR}/src/tracer/unwind_cfi.c)
target_compile_options(test_tracer_unwind_cfi PRIVATE -O2 -fomit-frame-pointer)
target_include_directories(test_tracer_unwind_cfi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
target_link_libraries(test_tracer_unwind_cfi PRIVATE PkgConfig::LIBUNWIND PkgConfig::ZSTD Threads::Threads
                      ${CMAKE_DL_LIBS})

# The reduction of .eh_frame to rules, on hand-made tables and on this executable's own .plt.
memtap_unit_test(test_tracer_eh_frame unit/test_tracer_eh_frame.c LABELS tracer)
target_sources(test_tracer_eh_frame PRIVATE ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c
               ${PROJECT_SOURCE_DIR}/src/tracer/unwind_cfi.c)

# The shim's own walks against libunwind inside traced programs (MEMTAP_TEST_UNWIND_CHECK): a
# workload of the unwinder's hard cases, built like a Debian binary (-O2, no frame pointers) and
# without sanitizers (the shim must own malloc), run under `memtap record --full`.
if(TARGET memtap_preload AND TARGET memtap_cli)
  get_property(_mt_unwind_opts GLOBAL PROPERTY MEMTAP_CLEAN_COMPILE_OPTIONS)
  get_property(_mt_unwind_link_opts GLOBAL PROPERTY MEMTAP_CLEAN_LINK_OPTIONS)
  list(FILTER _mt_unwind_opts EXCLUDE REGEX "prototypes")
  add_executable(tracer_unwind_workload unit/test_tracer_unwind_workload.cpp)
  set_target_properties(tracer_unwind_workload PROPERTIES CXX_STANDARD 17
                        COMPILE_OPTIONS "${_mt_unwind_opts};-O2;-g;-fomit-frame-pointer"
                        LINK_OPTIONS "${_mt_unwind_link_opts}")
  target_link_libraries(tracer_unwind_workload PRIVATE Threads::Threads)
  memtap_unit_test(test_tracer_unwind_shim unit/test_tracer_unwind_shim.c LABELS tracer)
  add_dependencies(test_tracer_unwind_shim memtap_preload memtap_cli tracer_unwind_workload)
  target_compile_definitions(test_tracer_unwind_shim PRIVATE
    MEMTAP_EXE="$<TARGET_FILE:memtap_cli>"
    MEMTAP_PRELOAD_PATH="$<TARGET_FILE:memtap_preload>"
    WORKLOAD_PATH="$<TARGET_FILE:tracer_unwind_workload>"
    TRACER_PROGRAMS_DIR="${PROJECT_BINARY_DIR}/tests/tracer-programs")
endif()
