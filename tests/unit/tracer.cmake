# Tests of the preload shim (src/tracer, docs/tracer.md): its pure parts (configuration, sampler,
# sampled-pointer set) as ordinary instrumented unit tests, and the shim itself on small programs
# run with LD_PRELOAD. Those programs are built without sanitizers, like the shim: a sanitizer
# runtime must come first in the process and owns malloc.
if(NOT TARGET memtap_preload)
  return()
endif()

function(memtap_tracer_test name)
  memtap_unit_test(${name} unit/${name}.c ${ARGN})
  target_link_libraries(${name} PRIVATE memtap_tracer_pure)
endfunction()

memtap_tracer_test(test_tracer_config LABELS tracer)
memtap_tracer_test(test_tracer_sampler LABELS tracer)
memtap_tracer_test(test_tracer_sampled_set LABELS tracer tsan)

# The programs run under the shim, with the shim's own (uninstrumented) flags.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
endif()
get_property(_mt_preload_opts GLOBAL PROPERTY MEMTAP_CLEAN_COMPILE_OPTIONS)
get_property(_mt_preload_link_opts GLOBAL PROPERTY MEMTAP_CLEAN_LINK_OPTIONS)
add_executable(tracer_prog unit/tracer_prog.c)
target_link_libraries(tracer_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_library(tracer_prog_lib SHARED unit/tracer_prog_lib.c)
add_library(tracer_prog_early_lib SHARED unit/tracer_prog_early_lib.c)
target_link_libraries(tracer_prog_early_lib PRIVATE Threads::Threads)
add_executable(tracer_prog_early unit/tracer_prog_early.c)
target_link_libraries(tracer_prog_early PRIVATE tracer_prog_early_lib)
set(_mt_progs tracer_prog tracer_prog_lib tracer_prog_early tracer_prog_early_lib)
if(CMAKE_CXX_COMPILER)
  add_executable(tracer_prog_exceptions unit/tracer_prog_exceptions.cpp)
  set_target_properties(tracer_prog_exceptions PROPERTIES CXX_STANDARD 17)
  list(APPEND _mt_progs tracer_prog_exceptions)
endif()
foreach(prog IN LISTS _mt_progs)
  # -Wstrict-prototypes and -Wmissing-prototypes are C-only: keep warnings that C++ accepts.
  set(_opts "")
  foreach(opt IN LISTS _mt_preload_opts)
    if(NOT (prog STREQUAL "tracer_prog_exceptions" AND opt MATCHES "prototypes"))
      list(APPEND _opts ${opt})
    endif()
  endforeach()
  set_target_properties(${prog} PROPERTIES COMPILE_OPTIONS "${_opts}"
                                           LINK_OPTIONS "${_mt_preload_link_opts}")
endforeach()

memtap_tracer_test(test_tracer_preload LABELS tracer)
add_dependencies(test_tracer_preload memtap_preload ${_mt_progs})
target_compile_definitions(test_tracer_preload PRIVATE
  MEMTAP_PRELOAD_PATH="$<TARGET_FILE:memtap_preload>"
  TRACER_PROG_PATH="$<TARGET_FILE:tracer_prog>"
  TRACER_PROG_LIB_PATH="$<TARGET_FILE:tracer_prog_lib>"
  TRACER_PROG_EARLY_PATH="$<TARGET_FILE:tracer_prog_early>")
if(CMAKE_CXX_COMPILER)
  target_compile_definitions(test_tracer_preload PRIVATE
    TRACER_PROG_EXCEPTIONS_PATH="$<TARGET_FILE:tracer_prog_exceptions>")
else()
  target_compile_definitions(test_tracer_preload PRIVATE TRACER_PROG_EXCEPTIONS_PATH="")
endif()
