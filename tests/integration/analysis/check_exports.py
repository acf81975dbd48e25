#!/usr/bin/env python3
"""Checks memtap's pprof export with the tool users open it in (stdlib only); the HTML report's
checks in Chromium are tests/integration/report/.

  check_exports.py pprof MEMTAP TRACE...   go tool pprof reads the profile; its totals per sample
                                           type equal `memtap summary --json`'s exactly; the
                                           mapping is marked [FN][FL][LN][IN]; the first TRACE
                                           has inlined frames: a location with several lines

A missing tool skips the test (exit 77) unless CI=true, where it fails."""
import json
import os
import sys
import tempfile

from toolcheck import need, need_files, run


def raw_section(lines, title):
    """The lines of a section of `go tool pprof -raw` (after its title, up to the next title)."""
    start = lines.index(title) + 1
    end = start
    while end < len(lines) and (not lines[end] or lines[end][0].isspace() or
                                lines[end][0].isdigit()):
        end += 1
    return lines[start:end]


def check_raw_symbols(trace, lines, inlined):
    """The profile is symbolised: its one mapping says it has functions, file names, line numbers
    and inline frames, and (when `inlined`) some location holds an inlined chain of lines."""
    mappings = [l for l in raw_section(lines, "Mappings") if l.strip()]
    if len(mappings) != 1 or not mappings[0].rstrip().endswith("[FN][FL][LN][IN]"):
        sys.exit(f"FAIL: {trace}: the mapping is not marked [FN][FL][LN][IN]: {mappings}")
    # A location is "ID: ADDRESS M=1 FUNCTION FILE:LINE s=0", its inlined callers on the next,
    # indented lines.
    locations, current = [], None
    for l in raw_section(lines, "Locations"):
        if l.strip().split(":")[0].isdigit():
            current = [l.split(" M=1 ", 1)[1].rsplit(" s=", 1)[0]]
            locations.append(current)
        elif l.strip():
            current.append(l.strip().rsplit(" s=", 1)[0])
    if not locations or any(":" not in line for loc in locations for line in loc):
        sys.exit(f"FAIL: {trace}: locations without a file and line: {locations[:5]}")
    if inlined:
        chains = [loc for loc in locations if len(loc) > 1]
        if not chains:
            sys.exit(f"FAIL: {trace}: no location has inlined frames (several lines)")
        print(f"ok: {os.path.basename(trace)}: {len(chains)} locations with inlined frames, "
              f"e.g. {' <- '.join(chains[0])}")


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
            check_raw_symbols(trace, lines, inlined=trace == traces[0])
            top = run([go, "tool", "pprof", "-top", "-sample_index=alloc_space", "-unit=B", prof],
                      env=env)
            total_line = next(l for l in top.splitlines() if " total" in l)
            if f"of {want[1]}B total" not in total_line.replace(" B", "B"):
                sys.exit(f"FAIL: {trace}: -unit=B total line {total_line!r}, want {want[1]}B")
            print(f"ok: {os.path.basename(trace)} --at {at or 'end'}: pprof totals {totals}")


def pprof_rows(top):
    """The (flat, cum, function) rows of `go tool pprof -top -unit=B` (percentages left out: they
    are of different totals)."""
    lines = top.splitlines()
    start = next(i for i, l in enumerate(lines) if l.split()[:2] == ["flat", "flat%"]) + 1
    return sorted((l.split()[0], l.split()[3], l.split(None, 5)[5]) for l in lines[start:])


def check_focus(memtap, trace, regex, tmp):
    """`export --focus REGEX` is what pprof's -focus REGEX makes of the whole export: the same
    functions with the same flat and cum values, and its total is theirs."""
    go = need("go", "golang-go")
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"), PPROF_TMPDIR=tmp)
    whole, focused = os.path.join(tmp, "whole.pb.gz"), os.path.join(tmp, "focused.pb.gz")
    run([memtap, "export", "--format", "pprof", "-o", whole, trace])
    run([memtap, "export", "--format", "pprof", "--focus", regex, "-o", focused, trace])
    top = [go, "tool", "pprof", "-top", "-unit=B", "-nodefraction=0", "-edgefraction=0"]
    want = pprof_rows(run(top + ["-focus", regex, whole], env=env))
    got = pprof_rows(run(top + [focused], env=env))
    if got != want or not got:
        sys.exit(f"FAIL: {trace}: export --focus {regex!r} rows {got} != pprof -focus {want}")
    print(f"ok: {os.path.basename(trace)}: export --focus {regex!r} equals pprof -focus "
          f"({len(got)} functions)")


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "pprof":
        sys.exit(__doc__)
    memtap, traces = sys.argv[2], sys.argv[3:]
    need_files(traces)
    with tempfile.TemporaryDirectory() as tmp:
        check_pprof(memtap, traces, tmp)
        check_focus(memtap, traces[0], "phase1$", tmp)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
