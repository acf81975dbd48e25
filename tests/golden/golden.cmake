# Golden tests: the shared testdata (MEMTAP_TESTDATA) against memtrace's reference outputs, through
# the memtap CLI.
memtap_unit_test(test_golden golden/test_golden.c LABELS golden)
memtap_unit_test(test_check_corrupted golden/test_check_corrupted.c LABELS golden)
memtap_unit_test(test_cli golden/test_cli.c LABELS cli)
foreach(t test_golden test_check_corrupted test_cli)
  add_dependencies(${t} memtap_cli)
endforeach()
