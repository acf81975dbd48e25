#!/usr/bin/env python3
"""Checks memtap's exports with the tools users open them in (stdlib only).

  check_exports.py pprof MEMTAP TRACE...   go tool pprof reads the profile; its totals per sample
                                           type equal `memtap summary --json`'s exactly
  check_exports.py report MEMTAP TRACE     headless chromium loads the HTML report: no console
                                           message, the chart and the flame graph render, and
                                           filters (given in the URL) change the table

A missing tool skips the test (exit 77) unless CI=true, where it fails."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def need(tool, package):
    path = shutil.which(tool)
    if path:
        return path
    msg = f"{tool} not found (Debian package {package}; scripts/install-deps.sh installs it)"
    if os.environ.get("CI") == "true":
        sys.exit("FAIL: " + msg)
    print("SKIP: " + msg)
    sys.exit(SKIP)


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}\n{p.stderr}")
    return p.stdout


def check_pprof(memtap, traces, tmp):
    go = need("go", "golang-go")
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               PPROF_TMPDIR=tmp, GOFLAGS="-mod=mod")
    for trace in traces:
        summary = json.loads(run([memtap, "summary", "--json", trace]))
        for at, live_key in ((None, "live_end"), ("peak", None)):
            prof = os.path.join(tmp, "profile.pb.gz")
            args = [memtap, "export", "--format", "pprof", "-o", prof, trace]
            if at:
                args[2:2] = ["--at", at]
            run(args)
            raw = run([go, "tool", "pprof", "-sample_index=alloc_space", "-raw", prof], env=env)
            lines = raw.splitlines()
            header = lines.index(next(l for l in lines if l.startswith("Samples:")))
            types = lines[header + 1].split()
            assert types == ["alloc_objects/count", "alloc_space/bytes[dflt]",
                             "inuse_objects/count", "inuse_space/bytes"], types
            totals = [0, 0, 0, 0]
            for line in lines[header + 2:]:
                if ":" not in line or not line.strip()[0].isdigit():
                    break
                values = line.split(":")[0].split()
                for i in range(4):
                    totals[i] += int(values[i])
            live = summary[live_key] if live_key else summary["peak"]["live"]
            want = [summary["allocated"]["objects_estimated"], summary["allocated"]["bytes"],
                    live["objects_estimated"], live["bytes"]]
            if totals != want:
                sys.exit(f"FAIL: {trace} (--at {at}): pprof totals {totals} != summary {want}")
            top = run([go, "tool", "pprof", "-top", "-sample_index=alloc_space", "-unit=B", prof],
                      env=env)
            total_line = next(l for l in top.splitlines() if " total" in l)
            if f"of {want[1]}B total" not in total_line.replace(" B", "B"):
                sys.exit(f"FAIL: {trace}: -unit=B total line {total_line!r}, want {want[1]}B")
            print(f"ok: {os.path.basename(trace)} --at {at or 'end'}: pprof totals {totals}")


def chromium_dom(chromium, html, fragment, tmp):
    profile = tempfile.mkdtemp(dir=tmp)
    url = "file://" + html + ("#" + fragment if fragment else "")
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
                        "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                        "--dump-dom", url], capture_output=True, text=True, timeout=120)
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    if p.returncode != 0 or console:
        sys.exit(f"FAIL: chromium on {url}: exit {p.returncode}, console:\n" + "\n".join(console))
    body = p.stdout[p.stdout.find("<body"):]
    body = body[:body.find(">")]
    attrs = {}
    for part in body.split(' data-')[1:]:
        key, _, value = part.partition("=")
        attrs[key] = value.strip('"').split('"')[0]
    if attrs.get("ready") != "1":
        sys.exit(f"FAIL: the report's script did not finish on {url}: {attrs}")
    return attrs


def check_report(memtap, traces, tmp):
    chromium = need("chromium", "chromium")
    trace = traces[0]
    html = os.path.join(tmp, "report.html")
    run([memtap, "report", trace, "-o", html])
    with open(html, encoding="utf-8") as f:
        text = f.read()
    for bad in ("src=\"http", "href=\"http", "@import", "fetch(", "XMLHttpRequest"):
        if bad in text:
            sys.exit(f"FAIL: the report refers to something outside itself: {bad}")
    whole = chromium_dom(chromium, html, None, tmp)
    if int(whole["chart-points"]) < 10 or int(whole["flame-nodes"]) < 3:
        sys.exit(f"FAIL: chart or flame graph did not render: {whole}")
    rows = int(whole["table-rows"])
    print(f"ok: report renders: {whole}")
    site = whole["table-top"].split(" ")[0]
    checks = [("fn=" + site, lambda a: int(a["table-rows"]) < rows and site in a["table-top"]),
              ("notfn=" + site, lambda a: int(a["table-rows"]) == rows - 1 and
               site not in a["table-top"]),
              ("size_min=100000", lambda a: int(a["table-rows"]) < rows),
              ("inverted=1", lambda a: int(a["flame-nodes"]) >= 3)]
    for fragment, ok in checks:
        attrs = chromium_dom(chromium, html, fragment, tmp)
        if not ok(attrs):
            sys.exit(f"FAIL: filter #{fragment} did not change the report as expected: {attrs}"
                     f" (unfiltered: {whole})")
        print(f"ok: #{fragment}: {attrs}")


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("pprof", "report"):
        sys.exit(__doc__)
    mode, memtap, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    for t in traces:
        if not os.path.exists(t):
            if os.environ.get("CI") == "true":
                sys.exit(f"FAIL: missing test data {t}")
            print(f"SKIP: missing test data {t}")
            sys.exit(SKIP)
    with tempfile.TemporaryDirectory() as tmp:
        (check_pprof if mode == "pprof" else check_report)(memtap, traces, tmp)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
