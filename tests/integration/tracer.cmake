# Integration tests of the native tracer: `memtap record` on real programs (tests/integration/
# programs/, each with a known allocation pattern), checked by trace_facts (the reader API) and by
# an independent recount under glibc's own allocation log; run_tracer_tests.py drives them, one
# CTest entry per behaviour. Registered once the preload shim exists (target memtap_preload);
# under CI=true a missing shim, compiler or tool is an error instead of a skipped test.
set(_ci FALSE)
if("$ENV{CI}" STREQUAL "true")
  set(_ci TRUE)
endif()

if(NOT TARGET memtap_preload)
  if(_ci AND EXISTS ${PROJECT_SOURCE_DIR}/src/tracer/layer.cmake)
    message(FATAL_ERROR "src/tracer exists but defines no memtap_preload target: the tracer "
                        "integration tests cannot run")
  endif()
  message(STATUS "memtap_preload not built: the tracer integration tests are not registered")
  return()
endif()

find_package(Python3 COMPONENTS Interpreter)
find_program(MEMTAP_GCC gcc)
find_program(MEMTAP_GXX g++)
find_program(MEMTAP_CLANG clang)
foreach(_tool Python3_EXECUTABLE MEMTAP_GCC MEMTAP_GXX MEMTAP_CLANG)
  if(NOT ${_tool})
    if(_ci)
      message(FATAL_ERROR "${_tool} not found: the tracer integration tests need python3, gcc, "
                          "g++ and clang (scripts/install-deps.sh)")
    endif()
    message(WARNING "${_tool} not found: the tracer integration tests are not registered")
    return()
  endif()
endforeach()

# The checker: plain C on the reader API, built like the rest of the project.
add_executable(memtap_trace_facts integration/tracer/trace_facts.c)
target_link_libraries(memtap_trace_facts PRIVATE memtap_internal)

# The traced programs are compiled by explicit commands, not as CMake targets: they must be plain
# -O2 -g binaries whatever the project's own flags are (a sanitizer build would put a runtime
# that owns malloc into them), and the backtrace program is built by gcc and clang both.
set(_src ${CMAKE_CURRENT_LIST_DIR}/programs)
set(_out ${CMAKE_CURRENT_BINARY_DIR}/tracer-programs)
set(_cflags -O2 -g -Wall -Wextra -pthread -I${_src})
set(_outputs "")

# memtap_tracer_program(OUTPUT COMPILER SOURCE [extra flags...])
function(memtap_tracer_program output compiler source)
  add_custom_command(
    OUTPUT ${_out}/${output}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
    COMMAND ${compiler} ${_cflags} -o ${_out}/${output} ${_src}/${source} ${ARGN}
    DEPENDS ${_src}/${source} ${_src}/test_program.h
    COMMENT "Building tracer test program ${output}"
    VERBATIM)
  set(_outputs ${_outputs} ${_out}/${output} PARENT_SCOPE)
endfunction()

foreach(_p alloc_patterns threads lifecycle procs dlopen_main signal_malloc leaky slow_worker
           sampled jemalloc_probe rust_shims address_space mlock_all small_stack self_replace
           graceful lowered_limit altstack_malloc ending dropped room_under_limit sandboxed
           coroutine_malloc)
  memtap_tracer_program(${_p} ${MEMTAP_GCC} ${_p}.c -ldl)
endforeach()
# -fno-builtin: gcc would turn its calloc's malloc + memset into a call to calloc, itself.
memtap_tracer_program(own_malloc ${MEMTAP_GCC} own_malloc.c -ldl -fno-builtin)
# -no-pie -fno-pic: malloc's address taken in the code becomes a canonical PLT entry.
memtap_tracer_program(nopie_malloc_address ${MEMTAP_GCC} nopie_malloc_address.c -no-pie -fno-pic)
memtap_tracer_program(cxx_new ${MEMTAP_GXX} cxx_new.cpp)
memtap_tracer_program(backtrace_sites_gcc ${MEMTAP_GCC} backtrace_sites.c)
memtap_tracer_program(backtrace_sites_clang ${MEMTAP_CLANG} backtrace_sites.c)
memtap_tracer_program(libdl_alloc_lib.so ${MEMTAP_GCC} dl_alloc_lib.c -shared -fPIC)
# Bound at load and its relocations read-only after (as distributions build libraries).
memtap_tracer_program(libdl_alloc_lib_now.so ${MEMTAP_GCC} dl_alloc_lib.c -shared -fPIC -Wl,-z,now
                      -Wl,-z,relro)
memtap_tracer_program(librecount_marker.so ${MEMTAP_GCC} recount_marker.c -shared -fPIC)
# slow_fini is linked with libslow_fini.so, whose destructor runs after the tracer's.
memtap_tracer_program(libslow_fini.so ${MEMTAP_GCC} slow_fini_lib.c -shared -fPIC)
add_custom_command(
  OUTPUT ${_out}/slow_fini
  COMMAND ${MEMTAP_GCC} ${_cflags} -o ${_out}/slow_fini ${_src}/slow_fini.c -L${_out} -lslow_fini
          -Wl,-rpath,${_out}
  DEPENDS ${_src}/slow_fini.c ${_src}/test_program.h ${_out}/libslow_fini.so
  COMMENT "Building tracer test program slow_fini"
  VERBATIM)
list(APPEND _outputs ${_out}/slow_fini)
memtap_tracer_program(static_worker ${MEMTAP_GCC} slow_worker.c -static)
memtap_tracer_program(asan_worker ${MEMTAP_CLANG} slow_worker.c -fsanitize=address)
add_custom_target(memtap_tracer_programs ALL DEPENDS ${_outputs})

set(_driver ${CMAKE_CURRENT_LIST_DIR}/tracer/run_tracer_tests.py)
# In sanitizer and fuzzing builds libmemtap.so is instrumented and cannot be loaded into a plain
# program: in-process mode (MEMTAP=) cannot start there, and the tests' in-process parts skip.
set(_lib_sanitized "")
if(MEMTAP_SANITIZE OR MEMTAP_FUZZ)
  set(_lib_sanitized --lib-sanitized)
endif()
# The stack the tracer may need beyond what a program's calls need untraced (small_stack): its
# frames are larger unoptimised.
set(_stack_allowance 1024)
if(CMAKE_BUILD_TYPE STREQUAL "" OR CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(_stack_allowance 3072)
endif()
set(_tracer_tests
    full_alloc_patterns_exact_per_site
    inprocess_rate_one_records_every_allocation
    full_v2_compressed_same_sites
    glibc_malloc_checker_stays_on
    sandboxed_program_runs_as_untraced
    full_time_resolution_rounds_times_and_keeps_every_event
    full_times_show_the_programs_pauses
    sampled_trace_lasts_as_long_as_the_program
    trace_ends_where_the_program_did
    full_cxx_new_delete_and_exception_exact_per_site
    full_rust_allocator_shims_are_not_sites
    rust_program_names_are_demangled
    full_threads_free_each_others_blocks
    full_realloc_on_another_thread_keeps_every_free
    full_regions_reused_across_threads_keep_their_lifetimes
    full_64_threads
    full_600_threads_at_once_lose_nothing
    full_10000_short_lived_threads
    cancelled_threads_end_where_the_program_lets_them
    full_program_closing_its_descriptors_keeps_its_files_and_loses_nothing
    inprocess_program_closing_its_descriptors_keeps_its_files
    program_sees_only_its_own_descriptors
    program_under_resource_limits_runs_as_untraced
    program_under_address_space_limit_keeps_its_room
    program_lowering_its_address_space_limit_keeps_its_room
    program_lowering_its_address_space_limit_to_100_mib_keeps_nearly_all_its_room
    program_locking_its_memory_runs_as_untraced
    inprocess_unstarted_trace_leaves_no_file
    inprocess_ring_file_goes_however_the_program_ends
    inprocess_trace_is_whole_however_the_program_ends
    record_without_a_ring_directory_says_so_and_runs_nothing
    program_inherits_ignored_signals
    full_lifecycle_constructor_atexit_destructor
    full_library_destructor_frees_are_traced
    small_stack_thread_allocates_near_its_end
    full_fork_without_follow_traces_parent_only
    full_fork_exec_vfork_spawn_with_follow_fork
    full_processes_that_become_another_user_keep_their_traces
    processes_of_other_pid_namespaces_each_keep_their_trace
    follow_fork_traces_more_processes_than_descriptors
    program_in_a_time_namespace_is_traced_whole
    full_clone_child_gets_its_own_trace
    raw_clone_child_runs_untraced_and_is_said
    full_double_fork_daemon_followed
    forked_child_trace_starts_at_its_fork
    program_deleted_or_replaced_while_traced_keeps_its_names
    full_exec_wrapper_traces_the_execd_program
    exec_into_a_program_the_tracer_cannot_enter_is_said
    full_dlopen_dlclose_library_allocations
    full_deep_bound_library_allocations_are_traced
    deep_bound_libraries_opened_by_threads_at_once
    signal_interrupting_system_calls_stays_so
    full_signal_handler_mallocs_raise
    full_signal_handler_mallocs_inside_malloc
    signal_handler_on_a_small_alternate_stack_allocates
    coroutines_on_small_stacks_allocate
    full_signal_handler_longjmps_out_of_the_tracer
    full_ctrl_c_reaches_program_and_trace_is_written
    signals_sent_to_memtap_reach_the_program
    signals_reach_the_program_once
    terminal_signals_reach_the_program_once
    ctrl_z_stops_the_job_when_the_program_stops
    program_stopped_alone_leaves_memtap_running
    tap_watches_a_recorded_process_without_disturbing_its_trace
    tap_follows_a_process_tracing_itself_to_its_end
    tap_refuses_what_it_cannot_watch
    leaks_names_file_and_line
    recount_project_programs_match_glibc_mtrace
    recount_sqlite3_matches_glibc_mtrace
    recount_python3_matches_glibc_mtrace
    recount_git_log_matches_glibc_mtrace
    sampled_estimates_unbiased_over_seeds
    backtraces_resolve_gcc
    backtraces_resolve_clang
    backtraces_resolve_from_separate_debug_info
    ordering_producer_consumer_pinned
    jemalloc_kept_behind_shim
    own_malloc_is_said_and_what_it_passes_on_is_traced
    nopie_program_taking_malloc_address_is_not_said_to_define_it
    fault_program_sigkilled_trace_complete
    fault_record_sigkilled_program_finishes
    fault_record_sigkilled_before_a_process_starts_does_not_hold_it
    fault_record_sigkilled_ring_directory_swept
    fault_output_on_dev_full
    fault_full_ring_directory_says_set_tmpdir
    fault_static_program_refused
    fault_setuid_program_refused
    fault_sanitizer_program_refused)
foreach(_t IN LISTS _tracer_tests)
  add_test(NAME tracer_${_t}
           COMMAND ${Python3_EXECUTABLE} ${_driver} --memtap $<TARGET_FILE:memtap_cli>
                   --shim $<TARGET_FILE:memtap_preload> --facts $<TARGET_FILE:memtap_trace_facts>
                   --programs ${_out} --sources ${_src} --stack-allowance ${_stack_allowance}
                   ${_lib_sanitized} ${_t})
  set_tests_properties(tracer_${_t} PROPERTIES LABELS "integration;tracer" SKIP_RETURN_CODE 77
                                               TIMEOUT 300)
endforeach()
