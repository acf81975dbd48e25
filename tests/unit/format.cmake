# Unit tests of the format library, one per concern (STYLE.md).
memtap_unit_test(test_buf unit/test_buf.c LABELS format)
memtap_unit_test(test_location_codec unit/test_location_codec.c LABELS format)
memtap_unit_test(test_backtrace_codec unit/test_backtrace_codec.c LABELS format)
memtap_unit_test(test_writer unit/test_writer.c LABELS format)
memtap_unit_test(test_reader_errors unit/test_reader_errors.c LABELS format)
memtap_unit_test(test_round_trip unit/test_round_trip.c LABELS format)
memtap_unit_test(test_domain_writers unit/test_domain_writers.c LABELS format tsan)
memtap_unit_test(test_location_table unit/test_location_table.c LABELS format)
