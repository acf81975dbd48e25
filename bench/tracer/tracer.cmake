# The tracer benchmark (bench/tracer/README.md): malloc-heavy workload programs, the pass-through
# shim that measures the interposition floor, a rusage reporter for the runner, and the writer's
# own throughput. run.py runs them under each tracer; nothing here is a test.
foreach(workload churn tree strbuild)
  add_executable(bench_tracer_${workload} tracer/${workload}.c)
  target_link_libraries(bench_tracer_${workload} PRIVATE Threads::Threads)
endforeach()

# The C++ workload is built with g++ (the C++ standard library's operator new is what it measures).
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  add_executable(bench_tracer_containers tracer/containers.cpp)
  # The project's C warning flags include two that C++ compilers reject.
  get_target_property(_opts bench_tracer_containers COMPILE_OPTIONS)
  list(REMOVE_ITEM _opts -Wstrict-prototypes -Wmissing-prototypes)
  set_target_properties(bench_tracer_containers PROPERTIES COMPILE_OPTIONS "${_opts}"
                                                           CXX_STANDARD 17)
endif()

# LD_PRELOAD libraries: no lib prefix games, the runner finds them by these names in the build dir.
add_library(bench_tracer_floor SHARED tracer/floor_shim.c)
target_compile_options(bench_tracer_floor PRIVATE -fvisibility=hidden -ftls-model=initial-exec)
target_link_libraries(bench_tracer_floor PRIVATE ${CMAKE_DL_LIBS})
add_library(bench_tracer_rusage SHARED tracer/rusage_report.c)

add_executable(bench_tracer_writer tracer/bench_writer.c)
target_link_libraries(bench_tracer_writer PRIVATE memtap_internal)

# The shim's own cost per record, with a consumer that drops what it reads.
add_executable(bench_tracer_shim tracer/bench_shim.c)
target_link_libraries(bench_tracer_shim PRIVATE memtap_internal)

set_target_properties(
  bench_tracer_churn bench_tracer_tree bench_tracer_strbuild bench_tracer_floor
  bench_tracer_rusage bench_tracer_writer bench_tracer_shim PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                     ${PROJECT_BINARY_DIR}/bench/tracer
                                                     LIBRARY_OUTPUT_DIRECTORY
                                                     ${PROJECT_BINARY_DIR}/bench/tracer)
if(TARGET bench_tracer_containers)
  set_target_properties(bench_tracer_containers PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                           ${PROJECT_BINARY_DIR}/bench/tracer)
endif()
