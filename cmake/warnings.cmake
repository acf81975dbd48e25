# Compiler flags every target shares: warnings (errors only with MEMTAP_WERROR, which the project's
# CI turns on: a user's or a packager's build must never fail on a warning a newer or other
# compiler finds), sanitizers when asked for.
add_compile_options(-Wall -Wextra -Wshadow -Wno-unused-parameter
                    "$<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes;-Wmissing-prototypes>")
if(MEMTAP_WERROR)
  add_compile_options(-Werror)
endif()
# Linux-only project: glibc extensions (pidfd, memfd, dl_iterate_phdr, ...) are used throughout.
add_compile_definitions(_GNU_SOURCE)

if(MEMTAP_SANITIZE)
  set(_san -fsanitize=${MEMTAP_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san})
  add_link_options(${_san})
endif()

# Fuzzing builds instrument the whole library for coverage; only the targets link libFuzzer's main.
if(MEMTAP_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
