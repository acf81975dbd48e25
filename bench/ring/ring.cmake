# The ring transport benchmark: producer cost per record and consumer throughput.
add_executable(bench_ring ring/bench_ring.c)
target_link_libraries(bench_ring PRIVATE memtap_internal)
