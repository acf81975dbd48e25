# A real Go program traced with GODEBUG=traceallocfree=1 at test time, imported and checked
# against what it made and against `go tool trace -d=1` (tests/integration/go).
memtap_unit_test(test_go_import_program integration/go/test_go_import_program.c LABELS import integration)
target_compile_definitions(test_go_import_program PRIVATE
  MEMTAP_GO_WORK="${CMAKE_CURRENT_BINARY_DIR}/go-work"
  MEMTAP_GO_PROG_DIR="${CMAKE_CURRENT_SOURCE_DIR}/integration/go/allocprog")
set_tests_properties(test_go_import_program PROPERTIES TIMEOUT 600)
