# Tests of the consumer (src/record): synthetic rings written by the test process itself, read
# back through mt_reader; the causal repair fed directly; the refusals of `memtap record`.
add_library(memtap_record_testlib STATIC unit/record_testlib.c unit/record_helper.c)
target_link_libraries(memtap_record_testlib PUBLIC memtap_testutil ${CMAKE_DL_LIBS})
# The symbolisation tests need inlining and DWARF whatever the build type.
set_source_files_properties(unit/record_helper.c PROPERTIES COMPILE_OPTIONS "-O2;-g")

function(memtap_record_test name)
  memtap_unit_test(${name} unit/${name}.c ${ARGN})
  target_link_libraries(${name} PRIVATE memtap_record_testlib)
endfunction()

memtap_record_test(test_record_trace LABELS record tsan) # tsan: the zstd compressor thread
memtap_record_test(test_record_symbols LABELS record)
memtap_record_test(test_record_symtab LABELS record)
# The scope index against libdw at every address of code with inlined frames (scopes_helper.cpp).
enable_language(CXX)
memtap_record_test(test_record_scopes LABELS record)
target_sources(test_record_scopes PRIVATE unit/scopes_helper.cpp)
set_source_files_properties(unit/scopes_helper.cpp PROPERTIES COMPILE_OPTIONS "-O2;-g")
target_link_libraries(test_record_scopes PRIVATE PkgConfig::LIBDW)
memtap_record_test(test_record_symbols_debugfile LABELS record)
find_package(ZLIB REQUIRED)
target_link_libraries(test_record_symbols_debugfile PRIVATE ZLIB::ZLIB) # crafted compressed files
memtap_record_test(test_record_order LABELS record)
memtap_record_test(test_record_cli LABELS record)
memtap_record_test(test_record_addrmap LABELS record)
memtap_record_test(test_record_merge LABELS record)
memtap_record_test(test_record_ends LABELS record tsan) # tsan: the watcher thread
target_link_libraries(test_record_ends PRIVATE memtap_cli_lib)
