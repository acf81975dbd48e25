#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this): installs what is missing, then
#   1. a RelWithDebInfo build (gcc) and every CTest test;
#   2. Release builds with gcc and with clang (-O3 code and its warnings) and the tests again, but
#      for the slow ones the compiler does not change (see below);
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build (clang) and every test again, fuzz
#      corpus replays included;
#   4. a ThreadSanitizer build (clang) of the multi-threaded tests (CTest label "tsan");
#   5. clang-format on every C file; 6. install + pkg-config: a program builds against the install.
# Every build treats warnings as errors (MEMTAP_WERROR; a user's build does not). Build trees go to
# build-test/ (override with MEMTAP_TEST_BUILD). Ends with the time each stage took and one line
# counting every test. Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

out=${MEMTAP_TEST_BUILD:-$root/build-test}
jobs=$(nproc)
export MEMTAP_TESTDATA=${MEMTAP_TESTDATA:-$root/../shared/testdata}
failed=()
passed=()
stage_names=()
stage_us=()

now_us() { echo "${EPOCHREALTIME/./}"; }

timed() { # name command...: runs the command, remembers how long it took under `name`
  local name=$1 start rc; shift
  start=$(now_us)
  "$@"
  rc=$?
  stage_names+=("$name")
  stage_us+=($(($(now_us) - start)))
  return $rc
}

step() { # name command...
  local name=$1; shift
  echo "==> $name"
  if timed "$name" "$@"; then passed+=("$name"); else failed+=("$name"); echo "!!! $name failed"; fi
}

configure() { # dir cc build-type extra-cmake-args...
  local dir=$1 cc=$2 type=$3; shift 3
  local cxx=g++ # the C++ test programs (new/delete, exceptions) with the same compiler as the C
  [ "$cc" = clang ] && cxx=clang++
  CC=$cc CXX=$cxx cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMEMTAP_WERROR=ON \
    "$@" >/dev/null
}

build() { # dir cc build-type extra-cmake-args...
  configure "$@" && cmake --build "$1" -j "$jobs"
}

build_labelled() { # label dir cc build-type extra-cmake-args...: only the tests with that label
  # (unit tests: each one executable named as its test; anything else they need is a dependency
  # of that target), not the whole tree: the TSan stage runs a dozen of the suite's tests.
  local label=$1 dir=$2 targets; shift
  configure "$@" || return 1
  mapfile -t targets < <(ctest --test-dir "$dir" -N -L "$label" | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p')
  [ ${#targets[@]} -gt 0 ] || { echo "no test labelled $label"; return 1; }
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
}

timed "install dependencies" ./scripts/install-deps.sh || exit 1

ctest_logs=()
run_ctest() { # dir extra-ctest-args...
  local dir=$1; shift
  local log=$dir/ctest-summary.log
  ctest_logs+=("$log")
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error "$@" | tee "$log"
  return "${PIPESTATUS[0]}"
}

step "release build" build "$out/release" gcc RelWithDebInfo
step "release tests" run_ctest "$out/release"

# Release (-O3): gcc and clang find other warnings there (maybe-uninitialized after inlining), and
# the optimiser is where undefined behaviour shows. The whole tree is built, tests and benchmarks
# included, since their warnings would break a user's Release build. The tests run again, except
# what the compiler cannot change and the RelWithDebInfo run already covers: test_analysis_memory
# (the peak RSS of the algorithm at 50 M events; the slowest test, a third of the suite's time)
# the analysis_* checks of the exported files by external tools (go tool pprof, chromium), and the
# report_* checks of the HTML report's own script in chromium (dragging, sorting, searching, the
# flame graph and diff pages), but for report_site_objects_match_top, which keeps the report's data
# (written by the C code) checked against the CLI's in every build.
release_tests=(-E '^(test_analysis_memory|analysis_.*|report_(flame|dragged|page|diff)_.*)$')
step "gcc Release build" build "$out/gcc-release" gcc Release
step "gcc Release tests" run_ctest "$out/gcc-release" "${release_tests[@]}"
step "clang Release build" build "$out/clang-release" clang Release
step "clang Release tests" run_ctest "$out/clang-release" "${release_tests[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "asan+ubsan build" build "$out/asan" clang RelWithDebInfo -DMEMTAP_SANITIZE=address,undefined -DMEMTAP_BENCH=OFF
step "asan+ubsan tests" run_ctest "$out/asan"
unset ASAN_OPTIONS UBSAN_OPTIONS

if grep -rqs 'LABELS[^)]*tsan' "$root/tests"; then
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  step "tsan build" build_labelled tsan "$out/tsan" clang RelWithDebInfo -DMEMTAP_SANITIZE=thread \
    -DMEMTAP_BENCH=OFF
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
echo "time per stage:"
total_us=0
for i in "${!stage_names[@]}"; do
  us=${stage_us[$i]}
  total_us=$((total_us + us))
  printf '  %7d.%d s  %s\n' $((us / 1000000)) $((us / 100000 % 10)) "${stage_names[$i]}"
done
printf '  %7d.%d s  total\n' $((total_us / 1000000)) $((total_us / 100000 % 10))
echo
for f in "${failed[@]}"; do echo "failed step: $f"; done
echo "tests: $total_pass passed, $total_fail failed"
[ ${#failed[@]} -eq 0 ]
