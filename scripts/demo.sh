#!/usr/bin/env bash
# The README's first command: installs what is missing, builds memtap (release, build/), records the
# bundled example program (examples/wordfreq.c: churn, growth by realloc and a leak at a known line)
# with every allocation traced, and shows what memtap makes of it: the summary, the top allocation
# sites, what was never freed, and a self-contained HTML report. Then, if the shared testdata is
# there, the same tools on a trace written by OCaml memtrace.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
memtap=build/memtap
show() { echo; echo "\$ $*"; "$@"; }

trace=build/wordfreq.ctf
show $memtap record --full -o "$trace" -- build/examples/wordfreq 100000
show $memtap summary "$trace"
show $memtap top -n 3 --depth 3 "$trace"
show $memtap leaks -n 2 --depth 3 "$trace"
show $memtap report "$trace" -o build/wordfreq_report.html
echo "(open build/wordfreq_report.html in a browser: summary, heap over time, flame graph, filters)"

testdata=${MEMTAP_TESTDATA:-../shared/testdata}
real=$testdata/memtrace/demo_v3.ctf
if [ -r "$real" ]; then
  echo; echo "--- a trace written by OCaml memtrace ---"
  show $memtap info "$real"
  show $memtap top -n 2 --depth 2 "$real"
fi
