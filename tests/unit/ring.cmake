# Tests of the event transport (src/ring). Multi-threaded ones carry the `tsan` label: CI runs
# them again in a -DMEMTAP_SANITIZE=thread build.
add_library(memtap_ring_testlib STATIC unit/ring_testlib.c)
target_link_libraries(memtap_ring_testlib PUBLIC memtap_testutil)

function(memtap_ring_test name)
  memtap_unit_test(${name} unit/${name}.c ${ARGN})
  target_link_libraries(${name} PRIVATE memtap_ring_testlib)
endfunction()

memtap_ring_test(test_ring_basics LABELS ring)
memtap_ring_test(test_ring_clock_anchor LABELS ring)
memtap_ring_test(test_ring_clock_tick LABELS ring tsan)
memtap_ring_test(test_ring_lossless LABELS ring tsan)
memtap_ring_test(test_ring_write_wait LABELS ring)
memtap_ring_test(test_ring_threads LABELS ring tsan)
memtap_ring_test(test_ring_flight LABELS ring tsan)
memtap_ring_test(test_ring_signal LABELS ring tsan)
memtap_ring_test(test_ring_fork LABELS ring)
memtap_ring_test(test_ring_corrupt LABELS ring)
memtap_ring_test(test_ring_consumer LABELS ring tsan)
memtap_ring_test(test_ring_consumer_runs LABELS ring)
memtap_ring_test(test_ring_cli LABELS ring)
memtap_ring_test(test_ring_malloc_free LABELS ring)
