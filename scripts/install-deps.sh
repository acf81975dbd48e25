#!/usr/bin/env bash
# Installs the Debian packages memtap builds, tests and benchmarks with: only the missing ones, so a
# second run does nothing. Both README set-up commands and .ci/run go through this script.
set -euo pipefail

packages=(
  cmake ninja-build pkg-config gcc clang clang-format   # toolchain; clang brings libFuzzer via libclang-rt
  libclang-rt-14-dev                                     # libFuzzer, ASan/UBSan/TSan runtimes for clang
  libcmocka-dev                                          # unit tests
  libzstd-dev                                            # reading .ctf.zst traces
  zlib1g-dev                                             # gzip for pprof export
  python3                                                # drives the pprof and HTML report checks
  golang-go                                              # go tool pprof reads memtap's pprof export in a test
  chromium                                               # headless: the HTML report renders without errors in a test
  g++                                                    # C++ test programs of the tracer (new/delete, exceptions)
  libunwind-dev                                          # the tracer's baseline unwinder
  libdw-dev libelf-dev                                   # symbolisation (elfutils): functions, lines, inlined frames
  libiberty-dev                                          # demangling C++ and Rust names (binutils' demangler)
  libdeflate0                                            # inflates compressed debug sections ~3x faster than zlib (dlopen'd; zlib if absent)
  libjemalloc2                                           # test: a program's own allocator is kept under the shim
  sqlite3 git                                            # real programs the tracer tests record
  rustc                                                  # a Rust test program: its names must come out demangled
  heaptrack                                              # the yardstick in bench/tracer (never run by tests)
)

missing=()
for p in "${packages[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go 1.23 (for the Go trace import test: GODEBUG=traceallocfree=1) comes from bookworm-backports.
if [[ ! -x /usr/lib/go-1.23/bin/go ]]; then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  backports=/etc/apt/sources.list.d/memtap-backports.sources
  if [[ ! -f $backports ]]; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
      $SUDO tee "$backports" >/dev/null
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-1.23-go >/dev/null
fi
