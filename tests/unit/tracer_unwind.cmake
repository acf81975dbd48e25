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
