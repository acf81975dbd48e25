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
# libiberty (Debian's libiberty-dev, a static PIC archive without a .pc file): the demangler of
# binutils and gdb, for C++ and Rust names in the consumer's symbolisation.
find_path(LIBIBERTY_INCLUDE_DIR libiberty/demangle.h)
find_library(LIBIBERTY_LIBRARY NAMES libiberty.a iberty)
if(NOT LIBIBERTY_INCLUDE_DIR OR NOT LIBIBERTY_LIBRARY)
  message(FATAL_ERROR "libiberty (libiberty/demangle.h) not found: install libiberty-dev, or run "
                      "scripts/install-deps.sh")
endif()
add_library(memtap_libiberty INTERFACE)
target_include_directories(memtap_libiberty INTERFACE ${LIBIBERTY_INCLUDE_DIR})
target_link_libraries(memtap_libiberty INTERFACE ${LIBIBERTY_LIBRARY})
find_package(Threads REQUIRED)
