# The shim's unwinder benchmark: ns per stack walk for the cached CFI unwinder (warm and cold
# cache), libunwind's unw_backtrace and a frame-pointer walk, at a few depths, in one run. The
# unwinder's sources are compiled in (the shim links them privately), as the shim builds them.
add_executable(bench_unwind unwind/bench_unwind.c unwind/fp_chain.c unwind/nofp_chain.c
               ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c
               ${PROJECT_SOURCE_DIR}/src/tracer/unwind_cfi.c)
target_include_directories(bench_unwind PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_options(bench_unwind PRIVATE -O2 -fno-omit-frame-pointer)
set_source_files_properties(unwind/nofp_chain.c ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c
                            ${PROJECT_SOURCE_DIR}/src/tracer/unwind_cfi.c
                            TARGET_DIRECTORY bench_unwind
                            PROPERTIES COMPILE_OPTIONS -fomit-frame-pointer)
target_link_libraries(bench_unwind PRIVATE PkgConfig::LIBUNWIND Threads::Threads ${CMAKE_DL_LIBS})

# Which share of each loaded module's code the cached unwinder expresses (no timing).
add_executable(bench_unwind_coverage unwind/cfi_coverage.c
               ${PROJECT_SOURCE_DIR}/src/tracer/eh_frame.c
               ${PROJECT_SOURCE_DIR}/src/tracer/unwind_cfi.c)
target_include_directories(bench_unwind_coverage PRIVATE ${PROJECT_SOURCE_DIR}/src
                                                         ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(bench_unwind_coverage PRIVATE ${CMAKE_DL_LIBS})
