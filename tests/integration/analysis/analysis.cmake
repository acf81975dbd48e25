# Exports checked with the tools users open them in: Debian's `go tool pprof` for the pprof
# profile and its --focus (check_exports.py, stdlib Python 3; toolcheck.py is what the analysis
# and report checks share). A missing tool skips the test, except under CI=true where the script
# fails.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "python3 not found: under CI the pprof and HTML report checks must run")
  endif()
  message(WARNING "python3 not found: the pprof and HTML report checks are not built")
  return()
endif()
set(_check ${CMAKE_CURRENT_LIST_DIR}/check_exports.py)
set(_data ${MEMTAP_TESTDATA_DEFAULT}/memtrace)
add_test(NAME analysis_pprof_read_by_go_tool_pprof
         COMMAND ${Python3_EXECUTABLE} ${_check} pprof $<TARGET_FILE:memtap_cli>
                 ${_data}/demo_v3.ctf ${_data}/ocamlopt_v2.ctf ${_data}/lists_and_sets_v1.ctf)
# The HTML report's checks in Chromium are tests/integration/report/ (report_*).
set_tests_properties(analysis_pprof_read_by_go_tool_pprof
                     PROPERTIES LABELS "integration;analysis" SKIP_RETURN_CODE 77 TIMEOUT 300)
# memtap functions / callers against go tool pprof's flat, cum and -peek on the same pprof export.
add_test(NAME analysis_functions_match_go_tool_pprof
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_views.py
                 $<TARGET_FILE:memtap_cli> ${_data}/demo_v3.ctf ${_data}/ocamlopt_v2.ctf)
set_tests_properties(analysis_functions_match_go_tool_pprof
                     PROPERTIES LABELS "integration;analysis" SKIP_RETURN_CODE 77 TIMEOUT 300)
