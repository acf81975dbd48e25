# The Go trace import (src/import): Go events/s and peak memory on traces of a Go test program run
# short and long, next to the memtrace reader on the converted trace.
add_executable(bench_import import/bench_import.c)
target_link_libraries(bench_import PRIVATE memtap_internal)
target_compile_definitions(bench_import PRIVATE MEMTAP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
