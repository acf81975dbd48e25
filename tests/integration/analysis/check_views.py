#!/usr/bin/env python3
"""memtap's inclusive-cost views against `go tool pprof` on memtap's own pprof export (stdlib only).

  check_views.py MEMTAP PEEK_TRACE TRACE...

For every TRACE (PEEK_TRACE included) and for allocated bytes, live bytes and estimated objects
allocated: every row of `memtap functions --json` (flat and cum per function) equals the flat and
cum columns of `go tool pprof -top` on `memtap export --format pprof` of the same trace exactly,
and pprof shows no function memtap does not. For PEEK_TRACE (one without recursion through other frames, where the
two agree on what a caller is): every function's callers and callees in `memtap callers --json`
equal those of `go tool pprof -peek`. For the other traces, the same for every function that
appears at most once in each backtrace (with recursion, pprof counts an edge at every call, memtap
only at the outermost and innermost ones: docs/analysis.md).

A missing go skips the test (exit 77) unless CI=true, where it fails."""
import json
import os
import re
import shutil
import sys
import tempfile

from toolcheck import need, run


def value(text):
    """A pprof -unit=B value: "23712000B" or "0"."""
    return int(text[:-1]) if text.endswith("B") else int(text)


def pprof_name(name):
    """A node's function name as pprof prints it, without the " (inline)" or " (partial-inline)"
    it adds where a function appears inlined into another."""
    for suffix in (" (inline)", " (partial-inline)"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def shortened(pprof_names, memtap_names):
    """{pprof name: memtap name} for the names pprof shortened: it drops a trailing parenthesised
    part it takes for parameters ("Rec_check.(>>)" is shown "Rec_check.")."""
    out = {}
    for p in set(pprof_names) - set(memtap_names):
        full = [m for m in set(memtap_names) - set(pprof_names)
                if m.startswith(p) and m[len(p):].startswith("(")]
        if len(full) == 1:
            out[p] = full[0]
    return out


def pprof_top(go, env, prof, index):
    """{function: (flat, cum)} from go tool pprof -top, every node."""
    out = run([go, "tool", "pprof", "-top", "-unit=B", "-nodefraction=0", "-nodecount=1000000",
               "-sample_index=" + index, prof], env=env)
    rows, started = {}, False
    for line in out.splitlines():
        if line.split() == ["flat", "flat%", "sum%", "cum", "cum%"]:
            started = True
            continue
        if started and line.strip():
            parts = line.split(None, 5)
            name = pprof_name(parts[5])
            if name in rows:
                sys.exit(f"FAIL: {prof}: pprof has {name} both inlined and not: ambiguous")
            rows[name] = (value(parts[0]), value(parts[3]))
    return rows


def memtap_functions(memtap, trace, by):
    doc = json.loads(run([memtap, "functions", "--json", "-n", "0", "--by", by, trace]))
    # Estimates are real numbers (samples / rate x word bytes); the profile holds integers.
    return {r["key"]["function"]: (round(r["flat"]["value"]), round(r["cum"]["value"]))
            for r in doc["rows"]}


def pprof_peek(go, env, prof):
    """{function: ({caller: value}, {callee: value})} from go tool pprof -peek '.'."""
    out = run([go, "tool", "pprof", "-peek", ".", "-unit=B", "-nodefraction=0",
               "-edgefraction=0", "-sample_index=alloc_space", prof], env=env)
    peeks, before, current = {}, {}, None
    for line in out.splitlines():
        if line.startswith("---"):
            before, current = {}, None
            continue
        if "|" not in line:
            continue
        left, name = line.split("|", 1)
        name, parts = name.strip(), left.split()
        name = pprof_name(name)
        if len(parts) == 5 and parts[1].endswith("%"):  # the function's own line
            current = name
            peeks[name] = (before, {})
        elif len(parts) == 2 and parts[1].endswith("%"):
            (peeks[current][1] if current else before)[name] = value(parts[0])
    return peeks


def memtap_peeks(memtap, trace):
    doc = json.loads(run([memtap, "callers", "--json", "-n", "0", "--lines", "0", ".", trace]))
    return {f["function"]: ({e["function"]: round(e["value"]) for e in f["callers"]
                             if e["function"]},
                            {e["function"]: round(e["value"]) for e in f["callees"]})
            for f in doc["functions"]}


def recursive_functions(memtap, trace):
    """The functions that appear more than once in some backtrace (`memtap flame --folded`)."""
    out = set()
    for line in run([memtap, "flame", "--folded", trace]).splitlines():
        frames = line.rsplit(" ", 1)[0].split(";")
        out |= {f for f in frames if frames.count(f) > 1}
    return out


def main():
    memtap, peek_trace, traces = sys.argv[1], sys.argv[2], sys.argv[2:]
    go = need("go", "golang-go")
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"), PPROF_TMPDIR=tmp,
               GOFLAGS="-mod=mod")
    try:
        for trace in traces:
            prof = os.path.join(tmp, "profile.pb.gz")
            run([memtap, "export", "--format", "pprof", "-o", prof, trace])
            for by, index in (("bytes", "alloc_space"), ("live", "inuse_space"),
                              ("count", "alloc_objects")):
                want, got = pprof_top(go, env, prof, index), memtap_functions(memtap, trace, by)
                renamed = shortened(want, got)
                want = {renamed.get(f, f): v for f, v in want.items()}
                if not want:
                    sys.exit(f"FAIL: {trace}: no rows parsed from go tool pprof -top")
                zero = {f for f, v in want.items() if v == (0, 0)}  # pprof lists them, memtap not
                bad = [(f, want.get(f), got.get(f)) for f in sorted(set(want) | set(got))
                       if f not in zero and want.get(f) != got.get(f)]
                if bad:
                    sys.exit(f"FAIL: {trace} --by {by}: (function, pprof, memtap) differ: "
                             f"{bad[:10]} ({len(bad)} in all)")
                print(f"ok: {os.path.basename(trace)} {by}: {len(got)} functions, flat and cum "
                      f"equal to pprof's ({len(renamed)} names shortened by pprof)")
            want, got = pprof_peek(go, env, prof), memtap_peeks(memtap, trace)
            renamed = shortened(want, got)
            want = {renamed.get(f, f): v for f, v in want.items()}
            if set(want) != set(got):
                sys.exit(f"FAIL: {trace}: peek functions differ: {set(want) ^ set(got)}")
            skip = set() if trace == peek_trace else recursive_functions(memtap, trace)
            if trace == peek_trace and recursive_functions(memtap, trace):
                sys.exit(f"FAIL: {trace}: PEEK_TRACE must have no function twice in a backtrace")
            compared = 0
            for f in want:
                if f in skip:
                    continue
                # Callers and callees are named as pprof shows them (it shortens some names).
                w = tuple({renamed.get(k, k): v for k, v in d.items()} for d in want[f])
                if w != got[f]:
                    sys.exit(f"FAIL: {trace}: {f}: pprof peek {w} != memtap {got[f]}")
                compared += 1
            print(f"ok: {os.path.basename(trace)}: callers and callees of {compared} functions "
                  f"equal to pprof -peek's ({len(skip)} recursive ones not compared)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
