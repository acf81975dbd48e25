#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this): installs what is missing, then
#   1. a release build (gcc) and every CTest test;
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build (clang) and every test again, fuzz
#      corpus replays included;
#   3. a ThreadSanitizer build (clang) of the multi-threaded tests (CTest label "tsan");
#   4. clang-format on every C file; 5. install + pkg-config: a program builds against the install.
# Build trees go to build-test/ (override with MEMTAP_TEST_BUILD). Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
./scripts/install-deps.sh || exit 1

out=${MEMTAP_TEST_BUILD:-$root/build-test}
jobs=$(nproc)
export MEMTAP_TESTDATA=${MEMTAP_TESTDATA:-$root/../shared/testdata}
failed=()
passed=()

step() { # name command...
  local name=$1; shift
  echo "==> $name"
  if "$@"; then passed+=("$name"); else failed+=("$name"); echo "!!! $name failed"; fi
}

build() { # dir cc extra-cmake-args...
  local dir=$1 cc=$2; shift 2
  CC=$cc cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null &&
    cmake --build "$dir" -j "$jobs"
}

ctest_logs=()
run_ctest() { # dir extra-ctest-args...
  local dir=$1; shift
  local log=$dir/ctest-summary.log
  ctest_logs+=("$log")
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error "$@" | tee "$log"
  return "${PIPESTATUS[0]}"
}

step "release build" build "$out/release" gcc
step "release tests" run_ctest "$out/release"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "asan+ubsan build" build "$out/asan" clang -DMEMTAP_SANITIZE=address,undefined -DMEMTAP_BENCH=OFF
step "asan+ubsan tests" run_ctest "$out/asan"
unset ASAN_OPTIONS UBSAN_OPTIONS

if grep -rqs 'LABELS[^)]*tsan' "$root/tests"; then
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  step "tsan build" build "$out/tsan" clang -DMEMTAP_SANITIZE=thread -DMEMTAP_BENCH=OFF
  step "tsan tests" run_ctest "$out/tsan" -L tsan
  unset TSAN_OPTIONS
fi

check_format() {
  local files
  mapfile -t files < <(git ls-files '*.c' '*.h')
  clang-format --dry-run --Werror "${files[@]}"
}
step "clang-format" check_format

check_install() {
  local prefix=$out/install
  rm -rf "$prefix"
  cmake --install "$out/release" --prefix "$prefix" >/dev/null || return 1
  local probe=$out/install-probe.c
  cat >"$probe" <<'C'
#include <memtap/format.h>
#include <stdio.h>
int main(void) { printf("memtap %s\n", mt_version()); return 0; }
C
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig
  # shellcheck disable=SC2046 # pkg-config prints several flags
  cc "$probe" -o "$out/install-probe" $(pkg-config --cflags --libs memtap) &&
    LD_LIBRARY_PATH=$(pkg-config --variable=libdir memtap) "$out/install-probe" &&
    "$prefix/bin/memtap" --version
}
step "install and pkg-config" check_install

# One closing line for the whole run: every CTest test of every build, plus the other steps.
total_pass=0 total_fail=0
for log in "${ctest_logs[@]}"; do
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" 2>/dev/null | tail -1)
  if [ -n "$line" ]; then
    f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
    n=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
    total_pass=$((total_pass + n - f)) total_fail=$((total_fail + f))
  fi
done
for name in "${passed[@]}"; do [[ $name == *tests ]] || total_pass=$((total_pass + 1)); done
for name in "${failed[@]}"; do [[ $name == *tests ]] || total_fail=$((total_fail + 1)); done
echo
for f in "${failed[@]}"; do echo "failed step: $f"; done
echo "tests: $total_pass passed, $total_fail failed"
[ ${#failed[@]} -eq 0 ]
