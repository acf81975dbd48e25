#!/usr/bin/env python3
"""How fast the HTML report is made and becomes usable (issue 12, "Speed"; stdlib only).

  report_timing.py MEMTAP TRACE [ROUNDS]

For TRACE: `memtap summary` and `memtap report` run alternately ROUNDS times (default 3), best
wall and CPU time of each and their ratios (CPU time is the steadier on a loaded machine); then the report opened in headless Chromium (1280 x 800) and
the page's 'memtap-drawn' performance mark read (ms from navigation start to the flame graph and
tables drawn), best of ROUNDS fresh loads. Not a test: figures only (docs/analysis.md)."""
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration", "report"))
from devtools import Browser  # noqa: E402


def wall(args):
    """Wall and CPU (user + system) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    w = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return w, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    memtap, trace = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        summary, report = [], []
        for _ in range(rounds):
            summary.append(wall([memtap, "summary", "--no-index", trace]))
            report.append(wall([memtap, "report", "--no-index", trace, "-o", html]))
        size = os.path.getsize(html)
        b = Browser(tmp)
        marks = []
        try:
            for _ in range(rounds):
                b.open("file://" + html)
                marks.append(b.evaluate(
                    "performance.getEntriesByName('memtap-drawn')[0].startTime"))
        finally:
            b.close()
    sw, sc = min(w for w, _ in summary), min(c for _, c in summary)
    rw, rc = min(w for w, _ in report), min(c for _, c in report)
    print(f"{os.path.basename(trace)}: summary {sw:.3f} s wall / {sc:.3f} s CPU, report "
          f"{rw:.3f} s wall / {rc:.3f} s CPU (x{rw / sw:.2f} wall, x{rc / sc:.2f} CPU), "
          f"report {size / 1e6:.2f} MB, drawn in Chromium after {min(marks):.0f} ms "
          f"(loads: {', '.join(f'{m:.0f}' for m in marks)} ms)")


if __name__ == "__main__":
    main()
