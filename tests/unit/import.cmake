# Tests of the Go execution-trace import (src/import, memtap/import.h, docs/go.md).
add_library(memtap_go_trace_builder STATIC unit/go_trace_builder.c)
memtap_unit_test(test_import_go unit/test_import_go.c LABELS import)
target_link_libraries(test_import_go PRIVATE memtap_go_trace_builder)
include(integration/go/go.cmake OPTIONAL)
