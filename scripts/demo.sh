#!/usr/bin/env bash
# The README's first command: installs what is missing, builds memtap (release, build/), and shows
# it at work on a real trace written by OCaml memtrace (from the shared testdata: info, dump,
# check, the top sites, what was not freed, an HTML report) and on a trace written through
# memtap's own C API (examples/write_trace.c).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
memtap=build/memtap
testdata=${MEMTAP_TESTDATA:-../shared/testdata}
real=$testdata/memtrace/demo_v3.ctf

show() { echo; echo "\$ $*"; "$@"; }
if [ -r "$real" ]; then
  show $memtap info "$real"
  echo; echo "\$ $memtap dump $real | head -5   (lines cut at 160 columns)"
  { $memtap dump "$real" || true; } | head -5 | cut -c1-160
  show $memtap check "$real"
  show $memtap top -n 3 --depth 3 "$real"
  show $memtap leaks -n 3 --depth 2 "$real"
  show $memtap report "$real" -o build/demo_report.html
  echo "(open build/demo_report.html in a browser: summary, heap over time, flame graph, filters)"
else
  echo "(no shared testdata at $testdata: set MEMTAP_TESTDATA to show a trace written by OCaml memtrace)"
fi
example=build/example.ctf
show build/examples/write_trace "$example"
show $memtap info "$example"
echo; echo "\$ $memtap dump $example | head -3"
{ $memtap dump "$example" || true; } | head -3
