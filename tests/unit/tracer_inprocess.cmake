# In-process mode of the preload shim (MEMTAP=path / MEMTRACE=path, src/tracer/inprocess.c): the
# process traces itself through a consumer thread that loads libmemtap. The program runs under the
# shim, so it is built with the shim's uninstrumented flags.
if(NOT TARGET memtap_preload)
  return()
endif()
get_property(_mt_ip_opts GLOBAL PROPERTY MEMTAP_CLEAN_COMPILE_OPTIONS)
get_property(_mt_ip_link_opts GLOBAL PROPERTY MEMTAP_CLEAN_LINK_OPTIONS)
add_executable(tracer_inprocess_prog unit/tracer_inprocess_prog.c)
set_target_properties(tracer_inprocess_prog PROPERTIES COMPILE_OPTIONS "${_mt_ip_opts}"
                                                       LINK_OPTIONS "${_mt_ip_link_opts}")
# The control API's program (mt_tracer_start/stop): once linked with libmemtap only (the shim is
# preloaded), once linked with the shim too (no LD_PRELOAD needed). It links libmemtap, which is
# instrumented in sanitizer and fuzzing builds while the program must not be: there the programs
# are not built and the tests skip (MEMTAP_LIB_SANITIZED below).
set(_mt_control_progs "")
if(NOT MEMTAP_SANITIZE AND NOT MEMTAP_FUZZ)
  add_executable(tracer_control_prog unit/tracer_control_prog.c)
  add_executable(tracer_control_linked_prog unit/tracer_control_prog.c)
  foreach(_mt_prog tracer_control_prog tracer_control_linked_prog)
    set_target_properties(${_mt_prog} PROPERTIES COMPILE_OPTIONS "${_mt_ip_opts}"
                                                 LINK_OPTIONS "${_mt_ip_link_opts}")
    target_link_libraries(${_mt_prog} PRIVATE memtap Threads::Threads)
  endforeach()
  target_link_libraries(tracer_control_linked_prog PRIVATE memtap_preload)
  set(_mt_control_progs tracer_control_prog tracer_control_linked_prog)
endif()
memtap_unit_test(test_tracer_inprocess unit/test_tracer_inprocess.c LABELS tracer)
add_dependencies(test_tracer_inprocess memtap_preload memtap tracer_inprocess_prog
                 ${_mt_control_progs})
target_compile_definitions(test_tracer_inprocess PRIVATE
  MEMTAP_PRELOAD_PATH="$<TARGET_FILE:memtap_preload>"
  INPROCESS_PROG_PATH="$<TARGET_FILE:tracer_inprocess_prog>")
if(_mt_control_progs)
  target_compile_definitions(test_tracer_inprocess PRIVATE
    CONTROL_PROG_PATH="$<TARGET_FILE:tracer_control_prog>"
    CONTROL_LINKED_PROG_PATH="$<TARGET_FILE:tracer_control_linked_prog>")
endif()
if(MEMTAP_SANITIZE OR MEMTAP_FUZZ)
  # libmemtap.so, which the shim loads in this mode, is instrumented in this build: it cannot be
  # loaded into an uninstrumented program, so the tests say so and skip.
  target_compile_definitions(test_tracer_inprocess PRIVATE MEMTAP_LIB_SANITIZED=1
                                                           CONTROL_PROG_PATH=""
                                                           CONTROL_LINKED_PROG_PATH="")
endif()
