# Third-party libraries, all from Debian packages (scripts/install-deps.sh installs them).
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
if(MEMTAP_TESTS)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()
# The tracer: libunwind (the baseline unwinder, loaded privately by the preload shim) and elfutils'
# libdw (symbolisation in the consumer: functions, files, lines, inlined frames).
pkg_check_modules(LIBUNWIND REQUIRED IMPORTED_TARGET libunwind)
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)
find_package(Threads REQUIRED)
