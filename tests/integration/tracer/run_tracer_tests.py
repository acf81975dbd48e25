#!/usr/bin/env python3
"""Integration tests of `memtap record` on real programs (stdlib only). One CTest entry per
behaviour: run_tracer_tests.py --memtap M --shim S --facts F --programs DIR --sources DIR TEST

The test programs (tests/integration/programs/) mark each allocation site with an "@expect"
comment (see test_program.h); trace_facts (the reader API) extracts per-site counts and checks
the trace's invariants. Every trace made here also passes `memtap check`, and dumps identically
with --no-domain after `memtap copy --version 2`.

The independent recount runs a program once under glibc's own allocation log (libc_malloc_debug.so
with MALLOC_TRACE, switched on by the preloaded recount_marker.so) and once under
`memtap record --full`, and compares what each saw after the marker allocation that
recount_marker.so makes in its constructor (mtrace starts there; the shim starts earlier, with the
first malloc). Only malloc blocks (External) count on memtap's side: mapped regions (Major) are
not in glibc's log. The mapping between the two:
  glibc log line                 call                            memtap trace
  "+ ADDR SIZE"                  malloc, calloc, realloc(NULL, n), one allocation
                                 reallocarray(NULL, ...), memalign,
                                 posix_memalign, aligned_alloc,
                                 valloc, pvalloc
  "< OLD" then "> NEW SIZE"      realloc/reallocarray(p, n) that  a collect of OLD's object, then
                                 succeeded, moved or not          an allocation
  "- ADDR"                       free(p), realloc(p, 0)           a collect (an unknown free, not
                                                                  written, if never seen)
  "! OLD SIZE"                   failed realloc                   nothing
  "+ (nil) SIZE"                 failed malloc                    nothing
  (not logged)                   calloc overflow, posix_memalign  nothing
                                 with a bad alignment, reallocarray
                                 overflow, free(NULL)
So allocations = "+" (not nil) + ">" lines, frees = "-" + "<" lines. Both runs see the same
environment variable names (those memtap record adds, and MALLOC_TRACE): python builds
os.environ, so one more variable is more allocations. __libc_freeres, which mtrace runs at exit
to free libc's own memory, is a no-op in recount_marker.so so that both runs end alike. For
dlopen, ld.so's own blocks (innermost frame in rtld-malloc.h; logged from ld-linux) are left out
on both sides: how many it allocates for its object tables depends on how many objects are loaded,
and the tracer loads its own.

A missing optional tool (sqlite3, git, libjemalloc, libc_malloc_debug) skips its test (exit 77)
unless CI=true, where it fails."""
import argparse
import fcntl
import glob
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
MALLOC_DEBUG = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
MARKER_BYTES = 1234567  # recount_marker.so's marker block; no program allocates this size
MARKER_WORDS = (MARKER_BYTES + 7) // 8

A = None  # the parsed command line
WORK = None  # this test's scratch directory


class Failure(Exception):
    pass


def fail(message):
    raise Failure(message)


def expect(condition, message):
    if not condition:
        fail(message)


def skip(message, even_under_ci=False):
    """A missing tool skips the test, except under CI=true; what the machine cannot do (no root)
    always skips."""
    if os.environ.get("CI") == "true" and not even_under_ci:
        fail(message + " (CI=true: a missing tool is a failure)")
    print("SKIP: " + message)
    sys.exit(SKIP)


def program(name):
    return os.path.join(A.programs, name)


def source(name):
    return os.path.join(A.sources, name)


# ---------------------------------------------------------------------------------------------
# Running things


def run(args, env=None, timeout=240, stdin=subprocess.DEVNULL, cwd=None):
    try:
        return subprocess.run(args, env=env, capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=stdin, cwd=cwd)
    except subprocess.TimeoutExpired:
        fail(f"timed out after {timeout} s: {' '.join(args)}")


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMTAP", "MEMTRACE", "MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD"))}
    env["MEMTAP_PRELOAD"] = A.shim
    env["LC_ALL"] = "C"
    env["TMPDIR"] = os.path.join(WORK, "tmp")  # where record makes its ring directory
    env["XDG_CACHE_HOME"] = os.path.join(WORK, "cache")  # inflated debug files, not in $HOME
    if extra:
        env.update(extra)
    return env


def record_command(trace, argv, options=("--full",)):
    return [A.memtap, "record", "-o", trace, *options, "--", *argv]


def record(trace, argv, options=("--full",), env=None, timeout=240, cwd=None):
    """Runs `memtap record` and returns the CompletedProcess; the trace must exist."""
    p = run(record_command(trace, argv, options), env=env or base_env(), timeout=timeout, cwd=cwd)
    if not os.path.exists(trace):
        fail(f"memtap record wrote no {trace} (exit {p.returncode})\nstderr:\n{p.stderr}")
    no_rings_left()
    return p


def no_rings_left():
    """memtap record removes its ring directory (under $TMPDIR) when it is done."""
    left = [path for pattern in ("*.memtap-ring", "*.untraced")
            for path in glob.glob(os.path.join(WORK, "tmp", "**", pattern), recursive=True)]
    expect(not left, f"ring files left behind: {left[:5]}")


def untraced(argv, env=None, cwd=None):
    return run(argv, env=env or base_env(), cwd=cwd)


def same_behaviour(plain, traced, what, compare_stdout=True):
    """The program's stdout and exit status are unchanged by tracing."""
    if compare_stdout and plain.stdout != traced.stdout:
        fail(f"{what}: stdout differs under memtap record\n--- untraced\n{plain.stdout[-2000:]}"
             f"\n--- traced\n{traced.stdout[-2000:]}\n--- record's stderr\n{traced.stderr[-2000:]}")
    if plain.returncode != traced.returncode:
        fail(f"{what}: exit status {plain.returncode} untraced, {traced.returncode} under memtap "
             f"record\nstderr:\n{traced.stderr[-3000:]}")


# ---------------------------------------------------------------------------------------------
# Traces: facts, invariants, check, copy


def facts(trace, sources=(), depth=0, marker=False, skip_file=None):
    args = [A.facts]
    for s in sources:
        args += ["--source", s]
    if depth:
        args += ["--depth", str(depth)]
    if marker:
        args += ["--marker-words", str(MARKER_WORDS)]
    if skip_file:
        args += ["--skip-file", skip_file]
    p = run(args + [trace])
    try:
        f = json.loads(p.stdout)
    except ValueError:
        fail(f"trace_facts {trace}: exit {p.returncode}, no JSON\n{p.stderr}")
    return f


def verify_trace(trace, allow_truncated=False):
    """Every trace: invariants (trace_facts), `memtap check`, and copy --version 2 dumps alike."""
    f = facts(trace)
    if not f["read_ok"]:
        fail(f"{trace}: the reader stops: {f['read_error']}")
    if f["error_count"]:
        fail(f"{trace}: {f['error_count']} invariant violations, first: {f['errors']}")
    if f["truncated"] and not allow_truncated:
        fail(f"{trace}: the trace ends in a partial packet")
    p = run([A.memtap, "check", "-q", trace])
    ok = (0, 2) if allow_truncated else (0,)
    if p.returncode not in ok:
        fail(f"memtap check {trace} exited {p.returncode}\n{p.stdout}{p.stderr}")
    copy = trace + ".v2"
    p = run([A.memtap, "copy", "--version", "2", trace, copy])
    if p.returncode not in ok:  # (2: a cut trace, copied whole up to the cut)
        fail(f"memtap copy --version 2 {trace} exited {p.returncode}\n{p.stderr}")
    d1 = run([A.memtap, "dump", "--no-domain", trace])
    d2 = run([A.memtap, "dump", "--no-domain", copy])
    if allow_truncated and (d1.returncode not in ok or d2.returncode != 0):
        fail(f"dump exit status {d1.returncode} (trace), {d2.returncode} (its v2 copy)")
    if not allow_truncated and (d1.returncode or d2.returncode):
        fail(f"memtap dump failed: {d1.returncode} {d2.returncode}\n{d1.stderr}{d2.stderr}")
    if d1.stdout != d2.stdout:
        a, b = d1.stdout.splitlines(), d2.stdout.splitlines()
        first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        fail(f"dump --no-domain of {trace} and of its v2 copy differ at line {first + 1}: "
             f"{a[first:first + 1]} vs {b[first:first + 1]} ({len(a)} vs {len(b)} lines)")
    os.unlink(copy)
    return f


EXPECT_RE = re.compile(r"@expect(?:\[([\w,-]+)\])?((?:\s+\w+=\w+)+)")
LINE_RE = re.compile(r"@line\s+(\w+)")


def expectations(sources, mode):
    """{"file.c:LINE": {"allocs": N, ...}} from the @expect comments that apply to `mode`."""
    result = {}
    for name in sources:
        with open(source(name)) as fh:
            for number, text in enumerate(fh, 1):
                for modes, fields in EXPECT_RE.findall(text):
                    if modes and mode not in modes.split(","):
                        continue
                    entry = result.setdefault(f"{name}:{number}", {})
                    for key, value in (kv.split("=") for kv in fields.split()):
                        entry[key] = value if value in ("allocs", "no") else int(value)
    return result


def marked_lines(name):
    lines = {}
    with open(source(name)) as fh:
        for number, text in enumerate(fh, 1):
            for mark in LINE_RE.findall(text):
                lines[mark] = number
    return lines


def check_sites(f, sources, mode, what, scale=1, strict_sources=None):
    """The trace's per-site counts are exactly what the sources' @expect comments say; no line of
    the sources (or of strict_sources) allocates without an @expect."""
    expected = expectations(sources, mode)
    sites = f["sites"]
    problems = []
    for site, want in sorted(expected.items()):
        got = sites.get(site, {"allocs": 0, "collects": 0, "words": 0})
        for key, field in (("allocs", "allocs"), ("frees", "collects"), ("words", "words")):
            if key not in want:
                continue
            target = got["allocs"] if want[key] == "allocs" else want[key] * scale
            if got[field] != target:
                problems.append(f"{site}: {key} expected {target}, got {got[field]}")
        if want.get("top") != "no" and got["allocs"]:
            # The innermost frame itself is the program's line (not malloc, operator new or a
            # wrapper of the shim's).
            top = sum(g["allocs"] for key, g in f["top"].items()
                      if key.split("@")[-1] == site)
            if top != got["allocs"]:
                problems.append(f"{site}: innermost frame is this line for {top} of "
                                f"{got['allocs']} allocations")
    for site, got in sorted(sites.items()):
        if site not in expected and got["allocs"]:
            problems.append(f"{site}: {got['allocs']} unexpected allocations at this line")
    if problems:
        fail(f"{what}: per-site counts wrong:\n  " + "\n  ".join(problems))


def full_program(name, args=(), mode="all", sources=None, compare_stdout=True, env=None,
                 options=("--full",)):
    """Records one project program with --full; the common checks; returns (facts, process)."""
    sources = sources or [name + ".c"]
    argv = [program(name), *args]
    plain = untraced(argv, env=env)
    trace = os.path.join(WORK, name + ".ctf")
    traced = record(trace, argv, options, env=env)
    same_behaviour(plain, traced, " ".join([name, *args]), compare_stdout)
    verify_trace(trace)
    f = facts(trace, sources)
    check_summary_line(traced.stderr, trace, f)
    check_sites(f, sources, mode, " ".join([name, *args]))
    return f, traced


# Counts are grouped by three ("8,927"), as in every text output.
SUMMARY_RE = re.compile(r"memtap: (.*): (?:.*?, )?(\d[\d,]*) allocations?, (\d[\d,]*) frees?, "
                        r"(\d[\d,]*) unknown frees?, (\d[\d,]*) lost records?")


def count(text):
    """A count as text output writes it ("8,927") as a number."""
    return int(text.replace(",", ""))


def check_summary_line(stderr, trace, f):
    """record's closing line names the trace and its counts; --full loses no record."""
    lines = [m for m in SUMMARY_RE.finditer(stderr) if m.group(1) == trace]
    expect(lines, f"memtap record printed no closing line for {trace}:\n{stderr[-2000:]}")
    m = lines[-1]
    allocs, frees, lost = count(m.group(2)), count(m.group(3)), count(m.group(5))
    expect(allocs == f["allocs"] and frees == f["collects"],
           f"closing line says {allocs} allocations, {frees} frees; the trace has {f['allocs']} "
           f"and {f['collects']} collects")
    expect(lost == 0, f"{lost} records lost with --full (lossless)")


def trace_files(directory):
    return sorted(p for p in glob.glob(os.path.join(directory, "*"))
                  if os.path.isfile(p) and not p.endswith((".idx", ".v2")))


# ---------------------------------------------------------------------------------------------
# The tests


def test_full_alloc_patterns_exact_per_site():
    f, _ = full_program("alloc_patterns")
    expect(f["sample_rate"] == 1, f"--full trace has sample rate {f['sample_rate']}")
    expect("mode=full" in f["params"], f"ocaml_runtime_params {f['params']!r} lacks mode=full")


def test_inprocess_rate_one_records_every_allocation():
    # Rate 1 is every allocation recorded (the trace's rate says so to every analysis), whichever
    # route asks for it: in process, MEMTRACE_RATE=1 and MEMTAP_SAMPLE_INTERVAL=8 once kept the
    # byte sampler, which at rate 1 misses a 4-byte block half the time and every malloc(0)
    # (alloc_patterns' malloc(i) for i < 100 read 31 of 100 objects at 1 to 4 bytes).
    if A.lib_sanitized:
        skip("libmemtap.so is a sanitizer build: in-process mode cannot start (the plain builds "
             "run this test)", even_under_ci=True)
    argv = [program("alloc_patterns")]
    plain = untraced(argv)
    for variables in ({"MEMTRACE_RATE": "1"}, {"MEMTAP_SAMPLE_INTERVAL": "8"}):
        what = f"alloc_patterns in process, {variables}"
        trace = os.path.join(WORK, "rate-one-inprocess.ctf")
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTRACE": trace, **variables}))
        same_behaviour(plain, p, what)
        f = verify_trace(trace)
        expect(f["sample_rate"] == 1, f"{what}: sample rate {f['sample_rate']}")
        expect("mode=full" in f["params"], f"{what}: ocaml_runtime_params {f['params']!r}")
        check_sites(facts(trace, ["alloc_patterns.c"]), ["alloc_patterns.c"], "all", what)


def test_full_v2_compressed_same_sites():
    argv = [program("alloc_patterns")]
    plain = untraced(argv)
    trace = os.path.join(WORK, "alloc_patterns.ctf.zst")
    traced = record(trace, argv, ("--full", "--v2", "--compress"))
    same_behaviour(plain, traced, "alloc_patterns --v2 --compress")
    with open(trace, "rb") as fh:
        expect(fh.read(4) == b"\x28\xb5\x2f\xfd", "--compress did not write a zstd file")
    f = verify_trace(trace)
    expect(f["version"] == 2, f"--v2 wrote a version {f['version']} trace")
    check_summary_line(traced.stderr, trace, f)
    check_sites(facts(trace, ["alloc_patterns.c"]), ["alloc_patterns.c"], "all",
                "alloc_patterns --v2 --compress")


def test_glibc_malloc_checker_stays_on():
    # glibc's malloc checker (libc_malloc_debug.so, preloaded, with MALLOC_CHECK_ or mtrace)
    # defines the malloc family only under glibc's symbol version, which an unversioned lookup
    # does not see: the shim once skipped it for libc's malloc, switching the checker off. Under
    # the checker a malloc(0) block has no usable byte (24 without it).
    debug = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
    expect(os.path.exists(debug), f"{debug} (Debian's libc6) is missing")
    env = dict(base_env(), LD_PRELOAD=debug, MALLOC_CHECK_="3")
    argv = [program("alloc_patterns")]
    plain = untraced(argv, env=env)
    expect("malloc(0) usable: 0\n" in plain.stdout,
           f"the checker is not on even untraced: {plain.stdout!r} {plain.stderr[-500:]}")
    for options in (("--full",), ()):
        trace = os.path.join(WORK, f"malloc_check{len(options)}.ctf")
        traced = record(trace, argv, options, env=env)
        same_behaviour(plain, traced, f"alloc_patterns under MALLOC_CHECK_=3 {options}")
        verify_trace(trace)


def event_times(trace):
    """The time column of `memtap dump` (µs since the trace's start), every event in file order."""
    p = run([A.memtap, "dump", trace], timeout=600)
    expect(p.returncode == 0, f"memtap dump {trace}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return [int(line.split(None, 1)[0]) for line in p.stdout.splitlines() if line.strip()]


def test_full_times_show_the_programs_pauses():
    # A single-threaded program stamps its records with the recorder's clock tick while the
    # recorder polls busily (docs/ring.md §5); the recorder withdraws the tick before it naps, so
    # that a program that pauses is never stamped with a tick from before its pause. slow_worker:
    # rounds of 100 blocks allocated and freed, 50 ms of sleep between rounds. In the trace, the
    # rounds must be 50 ms apart, not bunched at the time the recorder last polled.
    rounds = 8
    argv = [program("slow_worker"), str(rounds)]
    plain = untraced(argv)
    trace = os.path.join(WORK, "pauses.ctf")
    traced = record(trace, argv)
    same_behaviour(plain, traced, "slow_worker")
    f = verify_trace(trace)
    check_summary_line(traced.stderr, trace, f)
    times = event_times(trace)
    expect(all(a <= b for a, b in zip(times, times[1:])), "event times go backwards")
    gaps = [(b - a, i) for i, (a, b) in enumerate(zip(times, times[1:])) if b - a >= 40000]
    expect(len(gaps) == rounds - 1,
           f"{len(gaps)} gaps of at least 40 ms between events, for {rounds - 1} pauses of 50 ms "
           f"between rounds: {gaps[:10]} (times {times[:3]} ... {times[-3:]})")
    # Each gap ends a round: 200 events (100 allocations, 100 frees) between two pauses, the
    # first with the start-up's. A tick that went stale while memtap was busy elsewhere stamps at
    # most 15 records before the thread reads its own clock (docs/ring.md §5); memtap withdraws
    # it before symbolising, the stall every program's first pause meets.
    ends = [i + 1 for _, i in gaps]
    lengths = [b - a for a, b in zip([0] + ends, ends + [len(times)])]
    expect(lengths[0] >= 200 and all(n >= 185 for n in lengths[1:]),
           f"events between the pauses: {lengths}; every round has 200")
    expect(all(g < 1000000 for g, _ in gaps), f"a pause of 50 ms reads as {max(gaps)[0]} µs")


def test_sampled_trace_lasts_as_long_as_the_program():
    # A sampled trace's last event is its last sample, which can come long before the program
    # ends: slow_worker allocates 32 KB in all (about 0 samples of 512 KiB), sleeping 50 ms after
    # each of its 8 rounds. Its trace must still last the program's 0.4 s (the last packet ends
    # when the program did), in info and summary, under record and in process, and in a copy.
    argv = [program("slow_worker"), "8"]
    plain = untraced(argv)
    runs = [("record", os.path.join(WORK, "lasting.ctf"))]
    if not A.lib_sanitized:
        runs.append(("in process", os.path.join(WORK, "lasting-inprocess.ctf")))
    for how, trace in runs:
        started = time.monotonic()
        if how == "record":
            traced = record(trace, argv, options=())
        else:
            traced = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace}))
        wall = time.monotonic() - started
        same_behaviour(plain, traced, f"slow_worker ({how})")
        verify_trace(trace)
        copy = trace + ".copy.ctf"
        p = run([A.memtap, "copy", trace, copy])
        expect(p.returncode == 0, f"copy of the {how} trace: exit {p.returncode}: {p.stderr}")
        times = event_times(trace)
        for what, command in (("info", [A.memtap, "info", "--json", trace]),
                              ("summary", [A.memtap, "summary", "--json", trace]),
                              ("info of the copy", [A.memtap, "info", "--json", copy])):
            p = run(command)
            expect(p.returncode == 0, f"{what} ({how}): exit {p.returncode}: {p.stderr}")
            duration = json.loads(p.stdout)["duration_s"]
            expect(0.38 <= duration <= wall,
                   f"{what} ({how}): the trace lasts {duration} s, the program ran 0.4 s (8 "
                   f"pauses of 50 ms) of the {wall:.3f} s run; last event at "
                   f"{times[-1] / 1e6 if times else 0} s")
    # A program killed (no end said by the shim) lasts until memtap saw it gone; the _exit of a
    # vfork child it had, which runs in the parent's memory and writes into its ring, is not its
    # end.
    trace = os.path.join(WORK, "lasting-killed.ctf")
    record(trace, [program("procs"), "vfork-killed", "-"], options=())
    p = run([A.memtap, "info", "--json", trace])
    expect(p.returncode == 0, f"info (killed): exit {p.returncode}: {p.stderr}")
    duration = json.loads(p.stdout)["duration_s"]
    expect(duration >= 0.28, f"a program killed 0.3 s after its vfork child's _exit: its trace "
                             f"lasts {duration} s")


def test_trace_ends_where_the_program_did():
    # Where the end of a trace comes from (docs/record.md §7) must never be another process's
    # event, nor a point before the program's own end.
    info = lambda trace: json.loads(run([A.memtap, "info", "--json", trace]).stdout)
    # 2000 clone(CLONE_VM) children share their parent's thread state and call _exit while the
    # parent writes its records: they must not write into its ring (they once wrote their end,
    # and the parent's 200,000 allocations read as a few thousand).
    trace = os.path.join(WORK, "clone-vm.ctf")
    traced = record(trace, [program("procs"), "clone-vm", "-"])
    expect(traced.returncode == 0, f"procs clone-vm: exit {traced.returncode}\n{traced.stderr}")
    f = verify_trace(trace)
    check_summary_line(traced.stderr, trace, f)
    allocs = info(trace)["events"]["alloc_ext"]
    expect(allocs >= 200010, f"procs clone-vm: {allocs} allocations traced, 200,010 made at least")
    # A library's destructor that pauses 300 ms runs after the tracer's own destructors: the
    # program ends after it, and so does its trace.
    trace = os.path.join(WORK, "slow-fini.ctf")
    plain = untraced([program("slow_fini")])
    traced = record(trace, [program("slow_fini")], options=())
    same_behaviour(plain, traced, "slow_fini")
    duration = info(trace)["duration_s"]
    expect(duration >= 0.28, f"slow_fini pauses 300 ms in a library destructor at exit: its trace "
                             f"lasts {duration} s")
    # A child that exits normally (no end said by the shim) 0.1 s after its fork, while its parent
    # sleeps 1.5 s before reaping it: its trace ends when it exited (memtap's nap wakes at the
    # end, pidfd_open), not when its parent reaped it nor up to a nap later, nor when memtap was
    # done reading symbols (a thread stamps ends meanwhile, docs/record.md §7: before it, a fresh
    # debug cache on a loaded 2-core machine read 0.406 s once in three CI builds). The child's
    # own exit (Python's finalisation, traced) takes 0.05-0.1 s more, and up to 0.4 s on a loaded
    # 2-core machine (a fresh clone's CI beside a build: 0.508 s against a reap 0.6 s after the
    # fork, when the parent slept 0.6 s): 1.0 s leaves room for load and is well before the reap.
    directory = os.path.join(WORK, "reaped-late")
    os.mkdir(directory)
    code = ("import os, sys, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    time.sleep(0.1)\n"
            "    sys.exit(0)\n"
            "time.sleep(1.5)\n"
            "os.waitpid(pid, 0)\n")
    trace = os.path.join(directory, "py.ctf")
    record(trace, [sys.executable, "-c", code], ("--follow-fork",))
    children = [path for path in trace_files(directory) if path != trace]
    expect(len(children) == 1, f"traces: {trace_files(directory)}")
    duration = info(children[0])["duration_s"]
    expect(0.09 <= duration < 1.0, f"a child that lived 0.1 s, reaped 1.4 s later: its trace "
                                    f"lasts {duration} s")
    # A process that exec'd a program the tracer does not enter (no LD_PRELOAD): its trace ends
    # with the traced image, not with the 0.5 s the exec'd slow_worker runs.
    trace = os.path.join(WORK, "exec-bare.ctf")
    traced = record(trace, [program("procs"), "exec-bare", program("slow_worker")], options=())
    expect("slow_worker done" in traced.stdout, f"exec-bare: {traced.stdout!r} {traced.stderr}")
    duration = info(trace)["duration_s"]
    # (0.4: what procs does before its exec takes well under 0.1 s, but a loaded 2-core machine
    # can hold its exit for a few tenths)
    expect(duration < 0.4, f"a trace that describes procs up to its exec lasts {duration} s, "
                           f"into the untraced slow_worker's 0.5 s")


def test_full_time_resolution_rounds_times_and_keeps_every_event():
    # --time-resolution 1ms: every event's time a whole millisecond after the trace's start, in
    # order, said in the trace's parameters; every event and every site's count as at the
    # format's own 1 µs; and what the option is for, a compressed trace of a program repeating
    # the same allocations at least 4 times smaller than at 1 µs (measured: about 9 times).
    argv = [program("threads"), "churn", "300000"]
    plain = untraced(argv)
    traces = {}
    for name, options in (("fine", ("--full", "--compress")),
                          ("coarse", ("--full", "--compress", "--time-resolution", "1ms"))):
        trace = os.path.join(WORK, f"resolution-{name}.ctf.zst")
        traced = record(trace, argv, options)
        same_behaviour(plain, traced, f"threads churn ({name})")
        f = verify_trace(trace)
        check_summary_line(traced.stderr, trace, f)
        check_sites(facts(trace, ["threads.c"]), ["threads.c"], "churn", f"threads churn ({name})")
        traces[name] = (trace, f)
    coarse, f = traces["coarse"]
    expect("time_resolution_us=1000" in f["params"],
           f"ocaml_runtime_params {f['params']!r} does not say the time resolution")
    expect("time_resolution" not in traces["fine"][1]["params"],
           "a trace at the format's own resolution names one in its parameters")
    times = event_times(coarse)
    expect(len(times) == f["allocs"] + f["collects"], "dump and trace_facts disagree")
    off = [t for t in times if t % 1000]
    expect(not off, f"{len(off)} of {len(times)} event times are not whole milliseconds: "
           f"{off[:5]}")
    expect(all(a <= b for a, b in zip(times, times[1:])), "event times go backwards")
    fine_size, coarse_size = os.path.getsize(traces["fine"][0]), os.path.getsize(coarse)
    expect(coarse_size * 4 <= fine_size,
           f"at 1 ms the compressed trace is {coarse_size} bytes, at 1 µs {fine_size}: "
           "not the reduction the option is for")
    # The same through the environment, in process (MEMTAP=), and refusals naming the value.
    if not A.lib_sanitized:
        trace = os.path.join(WORK, "resolution-inprocess.ctf")
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_RATE": "1",
                                    "MEMTAP_TIME_RESOLUTION": "10ms"}))
        same_behaviour(plain, p, "threads churn (in process, MEMTAP_TIME_RESOLUTION=10ms)")
        f = verify_trace(trace)
        expect("time_resolution_us=10000" in f["params"],
               f"in process: ocaml_runtime_params {f['params']!r} lack time_resolution_us=10000")
        off = [t for t in event_times(trace) if t % 10000]
        expect(not off, f"in process: {len(off)} event times are not multiples of 10 ms")
    for bad, env in ((("--time-resolution", "1"), None), (("--time-resolution", "2s"), None),
                     ((), {"MEMTAP_TIME_RESOLUTION": "0us"})):
        trace = os.path.join(WORK, "resolution-refused.ctf")
        p = run(record_command(trace, argv, ("--full", *bad)), env=base_env(env))
        said = bad[1] if bad else "MEMTAP_TIME_RESOLUTION=0us"
        expect(p.returncode == 64 and said in p.stderr and "1us to 1s" in p.stderr,
               f"record {' '.join(bad) or env}: exit {p.returncode}, said {p.stderr.strip()!r}")
        expect(not os.path.exists(trace), "a refused record left a trace file")


def test_full_cxx_new_delete_and_exception_exact_per_site():
    full_program("cxx_new", sources=["cxx_new.cpp"])


def test_full_rust_allocator_shims_are_not_sites():
    # __rust_alloc -> __rdl_alloc -> malloc, and a v0-mangled __rdl_alloc: dropped from the top
    # of the stack like operator new, so each allocation's site is the line that called them.
    full_program("rust_shims")


RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")


def test_rust_program_names_are_demangled():
    # A real Rust program, built both ways rustc mangles: legacy (the default) and v0.
    rustc = need("rustc", "rustc")
    for mangling in ("legacy", "v0"):
        exe = os.path.join(WORK, "rust_names_" + mangling)
        flags = ["-C", "symbol-mangling-version=v0"] if mangling == "v0" else []
        p = run([rustc, "-g", "-O", *flags, "-o", exe, source("rust_names.rs")], timeout=600)
        expect(p.returncode == 0, f"rustc ({mangling}) failed:\n{p.stderr[-2000:]}")
        plain = untraced([exe])
        trace = os.path.join(WORK, mangling + ".ctf")
        traced = record(trace, [exe])
        same_behaviour(plain, traced, "rust_names " + mangling)
        verify_trace(trace)
        folded = run([A.memtap, "export", "--format", "folded", "-o", "-", trace])
        expect(folded.returncode == 0, f"export folded: {folded.stderr}")
        names = {frame for line in folded.stdout.splitlines()
                 for frame in line.rsplit(" ", 1)[0].split(";")}
        bad = sorted(n for n in names
                     if RUST_HASH.search(n) or "$LT$" in n or "$u7b$" in n or "$C$" in n
                     or n.startswith("_ZN") or n.startswith("_R"))
        expect(not bad, f"{mangling}: names left mangled: {bad[:8]}")
        expect("rust_names::make_boxes" in names,
               f"{mangling}: no frame rust_names::make_boxes among {sorted(names)[:40]}")
        expect(any("rust_names::Holder<" in n and n.endswith(">::keep") or
                   n.endswith("rust_names::Holder<T>::keep") for n in names),
               f"{mangling}: no frame of Holder<...>::keep among {sorted(names)[:40]}")


def test_full_threads_free_each_others_blocks():
    full_program("threads", ["cross"], mode="cross")


def test_full_realloc_on_another_thread_keeps_every_free():
    # A block handed to another thread, shrunk in place there (realloc returns the same address)
    # and handed back to be freed, its address coming straight back to the next malloc, 20,000
    # times within microseconds: the realloc and the frees on either side of it must come out in
    # the program's order. (Stamping two threads' records alike, with the clock tick, lost it:
    # 1,572 unknown frees, in every run. Reading one ring's chunk whole while a second thread's
    # records waited, with one thread's records still written as they came, lost 512 blocks once
    # in about 25 runs under CPU contention: docs/record.md §2.) With each clock a ring can have:
    # a bare rdtsc, executed ahead of the load that received the block, stamped the free up to
    # 90 ns before the realloc that preceded it on the other thread (9 to 343 frees of the 20,000
    # taken by the wrong block on a 2-vCPU VM; docs/ring.md §4, clock).
    with open("/proc/cpuinfo") as cpuinfo:
        flags = set(cpuinfo.read().split())
    clocks = ["auto", "monotonic"]
    if {"constant_tsc", "nonstop_tsc"} <= flags:
        clocks.append("tsc")
    for clock in clocks:
        _, traced = full_program("threads", ["handback"], mode="handback",
                                 env=base_env({"MEMTAP_RING_CLOCK": clock}))
        trace = os.path.join(WORK, "threads.ctf")
        lines = [m for m in SUMMARY_RE.finditer(traced.stderr) if m.group(1) == trace]
        unknown = count(lines[-1].group(4))
        expect(unknown == 0, f"clock {clock}: {unknown} unknown frees of 20,000 blocks handed back")


def test_full_regions_reused_across_threads_keep_their_lifetimes():
    # One thread maps a region and unmaps it; the other then maps one of the same size, which the
    # kernel hands straight back, and keeps it 1 ms. Regions have no causal repair: only the
    # stamps order the first thread's unmap before the second one's map. Each of the second
    # thread's regions must live its 1 ms (stamped alike, 478 of 500 read as 0 us). The first
    # maps are the mapping thread's first records, read after the main thread's map that follows
    # them (docs/record.md §2): before stamps kept late maps apart, that region read as 0 us.
    full_program("threads", ["maps"], mode="maps")
    trace = os.path.join(WORK, "threads.ctf")
    p = run([A.memtap, "dump", trace], timeout=600)
    expect(p.returncode == 0, f"memtap dump: {p.stderr[-2000:]}")
    born, lives = {}, []
    for line in p.stdout.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        if fields[2].startswith("alloc") and re.search(r" maps@\S*threads\.c:\d+\S*$", line):
            born[fields[1]] = int(fields[0])
        elif fields[2] == "collect" and fields[1] in born:
            lives.append(int(fields[0]) - born.pop(fields[1]))
    expect(len(lives) == 150, f"{len(lives)} of the main thread's 150 regions collected")
    short = sorted(t for t in lives if t < 900)
    expect(not short, f"{len(short)} of 150 regions kept for 1 ms read as shorter: {short[:10]} us")


def test_full_64_threads():
    full_program("threads", ["many"], mode="many")
    # Every thread's stack is a region at <thread stack> (not the main thread's: the kernel's),
    # and each is collected at its thread's exit.
    trace = os.path.join(WORK, "threads.ctf")
    p = run([A.memtap, "top", "--json", "-n", "0", trace])
    groups = {json.dumps(g["key"]): g for g in json.loads(p.stdout)["groups"]}
    stacks = [g for k, g in groups.items() if "<thread stack>" in k]
    expect(len(stacks) == 1, f"no single <thread stack> site in top: {list(groups)[:5]}")
    g = stacks[0]
    expect(g["allocated"]["objects"] == 64 and g["freed"]["objects"] == 64,
           f"<thread stack>: {g['allocated']['objects']} allocated, {g['freed']['objects']} "
           "freed; expected the 64 threads' stacks, all collected")


def test_full_600_threads_at_once_lose_nothing():
    # 600 threads alive at once, each with a ring of its own: every record arrives (the file once
    # had 256 rings, and the 344 threads without one lost everything), and the ring directory
    # takes on disk about what the threads wrote, not 600 rings' worth (16 MiB each with --full).
    argv = [program("threads"), "crowd"]
    plain = untraced(argv)
    trace = os.path.join(WORK, "crowd.ctf")
    p = subprocess.Popen(record_command(trace, argv), env=base_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace")
    most = 0
    while p.poll() is None:  # the ring directory's disk usage while the threads run
        used = 0
        for f in glob.glob(os.path.join(WORK, "tmp", "**", "*.memtap-ring"), recursive=True):
            try:
                used += os.stat(f).st_blocks * 512
            except OSError:
                pass
        most = max(most, used)
        time.sleep(0.01)
    out, err = p.communicate()
    traced = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    same_behaviour(plain, traced, "threads crowd")
    no_rings_left()
    f = verify_trace(trace)
    check_summary_line(traced.stderr, trace, f)
    check_sites(facts(trace, ["threads.c"]), ["threads.c"], "crowd", "threads crowd")
    expect(most < 512 << 20, f"the ring file took {most >> 20} MiB on disk for 600 threads that "
           "wrote about 10 MiB")


def test_full_10000_short_lived_threads():
    full_program("threads", ["short"], mode="short")


def test_cancelled_threads_end_where_the_program_lets_them():
    # pthread_cancel acts at cancellation points (open, close, nanosleep, posix_fallocate...):
    # the tracer's own, made inside malloc and in the thread trampoline, let it end a thread
    # before its function ran (20 of 20 threads cancelled right after pthread_create never ran
    # theirs, sampled or full), or inside malloc while the program held its mutex, which then
    # stayed taken for good (a thread waiting in a lossless ring for a stopped memtap). The
    # tracer now holds cancellation off around them (common/cancel_hold.h).
    argv = [program("threads"), "cancel-start"]
    plain = untraced(argv)
    expect(plain.stdout == "cancel-start: 20 of 20 threads returned\nthreads cancel-start done\n",
           f"untraced: {plain.stdout!r}")
    for options in ((), ("--full",)):
        trace = os.path.join(WORK, "cancel-start.ctf")
        traced = record(trace, argv, options)
        same_behaviour(plain, traced, f"threads cancel-start {' '.join(options)}")
        if options:
            f = verify_trace(trace)
            check_summary_line(traced.stderr, trace, f)
            check_sites(facts(trace, ["threads.c"]), ["threads.c"], "cancel-start",
                        "threads cancel-start")
    # memtap stopped while the thread allocates: the ring fills and the thread waits inside
    # malloc (a nap of the lossless producer) when the cancel comes.
    argv = [program("threads"), "cancel-malloc", "1500"]
    trace = os.path.join(WORK, "cancel-malloc.ctf")
    p = subprocess.Popen(record_command(trace, argv), env=base_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace")
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(2.5)
    os.kill(p.pid, signal.SIGCONT)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("threads cancel-malloc: still running 120 s after memtap was let go on")
    expect(p.returncode == 0 and out == "cancel-malloc: thread cancelled, mutex free\n"
           "threads cancel-malloc done\n",
           f"threads cancel-malloc, memtap stopped 2.5 s: exit {p.returncode}, {out!r}\n{err[-2000:]}")
    no_rings_left()
    verify_trace(trace)


def test_full_program_closing_its_descriptors_keeps_its_files_and_loses_nothing():
    # The program closes every inherited descriptor (the ring file's among them), puts a file of
    # its own on 3..63, then starts threads and forks: new threads' rings are reserved through
    # the file's path, and the fork handlers never close or map the number the program reused.
    # Followed or not, the child must find its file intact (the program exits 1 otherwise).
    for options in (("--full",), ("--full", "--follow-fork")):
        f, traced = full_program("threads", ["closefds"], mode="closefds", options=options)
        expect(traced.returncode == 0,
               f"threads closefds under {' '.join(options)}: exit {traced.returncode}\n"
               f"{traced.stdout}{traced.stderr[-2000:]}")


def test_program_sees_only_its_own_descriptors():
    # The ring file's descriptor is closed once the file is mapped (a new thread's ring is
    # reserved through the path): a program listing its descriptors sees what it sees untraced,
    # under memtap record (sampled and full) and tracing itself.
    argv = [program("threads"), "fds"]
    plain = untraced(argv)
    expect(plain.stdout.startswith("main: 0 1 2\nthread: 0 1 2\n"),
           f"threads fds untraced:\n{plain.stdout}")
    for options in ((), ("--full",)):
        trace = os.path.join(WORK, "fds.ctf")
        same_behaviour(plain, record(trace, argv, options), "threads fds " + " ".join(options))
    if A.lib_sanitized:
        return  # in process: see test_inprocess_program_closing_its_descriptors_keeps_its_files
    trace = os.path.join(WORK, "fds-inprocess.ctf")
    p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace}))
    same_behaviour(plain, p, "threads fds (in process)")
    verify_trace(trace)


def test_program_under_resource_limits_runs_as_untraced():
    threads = program("threads")
    # An address-space limit the whole ring file (--full: 256 rings of 16 MiB) would not fit in:
    # a smaller file is mapped, and the program is traced whole.
    argv = ["sh", "-c", f"ulimit -v 400000; exec {threads} cross"]
    trace = os.path.join(WORK, "limit-v.ctf")
    same_behaviour(untraced(argv), record(trace, argv), "threads cross under ulimit -v")
    verify_trace(trace)
    check_sites(facts(trace, ["threads.c"]), ["threads.c"], "cross", "threads cross, ulimit -v")
    # A file size limit below the smallest ring file (memtap and the program under it): sizing it
    # would raise SIGXFSZ and kill the program; it runs to its end untraced instead, the shim says
    # why, and memtap that it wrote no trace (exit 1).
    argv = [threads, "cross"]
    p = run(["sh", "-c", "ulimit -f 1000; exec \"$@\"", "sh",
             *record_command(os.path.join(WORK, "limit-f.ctf"), argv)], env=base_env())
    expect(p.stdout == untraced(argv).stdout, f"threads cross under ulimit -f 1000: {p.stdout}")
    expect(p.returncode == 1 and "more than the file size limit" in p.stderr,
           f"under ulimit -f 1000: exit {p.returncode}, no word on the limit:\n{p.stderr}")
    # memtap under the limit too: the trace stops short of it, whole up to there, and says so;
    # the program runs to its end.
    argv = [threads, "churn", "200000"]
    trace = os.path.join(WORK, "limit-f-trace.ctf")
    p = run(["sh", "-c", "ulimit -f 3000; exec \"$@\"", "sh", *record_command(trace, argv)],
            env=base_env())
    expect(p.stdout == untraced(argv).stdout, f"threads churn under ulimit -f: {p.stdout}")
    expect(p.returncode == 1 and "past the file size limit" in p.stderr,
           f"memtap under ulimit -f: exit {p.returncode}\n{p.stderr[-2000:]}")
    size = os.path.getsize(trace)
    expect(100000 < size <= 3000 * 512, f"trace of {size} bytes under a 1536000-byte limit")
    verify_trace(trace, allow_truncated=True)


def test_program_under_address_space_limit_keeps_its_room():
    # Under `ulimit -v` every mapping of the shim (the sampled set's table, the ring file) takes
    # room the program has untraced. A program holding 64 MiB under a 112 MiB limit, which it
    # does untraced, must still do it traced, sampled and --full: the shim takes a small share of
    # the room left (before, the sampled set's 32 MiB and a ring file planned to fill whatever
    # could be mapped left it 5 to 41 MiB).
    # The data limit (`ulimit -d`) counts private writable mappings whole, reserved or not: the
    # sampled set's 32 MiB left the program 43 of its 64 MiB under an 80 MiB limit.
    for limit, argv in (("-v", ["sh", "-c", f"ulimit -v 114688; exec {program('address_space')} 64"]),
                        ("-d", ["sh", "-c", f"ulimit -d 81920; exec {program('address_space')} 64"])):
        plain = untraced(argv)
        expect(plain.stdout == "held 64 MiB\n", f"untraced under ulimit {limit}: {plain.stdout}")
        for options in ((), ("--full",)):
            trace = os.path.join(WORK, "limit-v-room.ctf")
            traced = record(trace, argv, options)
            same_behaviour(plain, traced, f"address_space 64 under ulimit {limit}, {options}")
            verify_trace(trace)


def test_program_lowering_its_address_space_limit_to_100_mib_keeps_nearly_all_its_room():
    # After a program's setrlimit(RLIMIT_AS) to 100 MiB, whatever the tracer keeps mapped is room
    # the program lost. The sampled set's table was reserved whole (32 MiB): traced sampled, the
    # program mapped 51 MiB where untraced it maps 97. Its pages are now mapped as members need
    # them. What stays (docs/tracer.md, "Resource limits"): the ring file's header, ring blocks
    # and registry (5 MiB) and the main thread's ring (4 MiB sampled, 16 MiB with --full), the
    # filter (1 MiB, sampled) and the shim's .bss (2.6 MiB); and the free rings kept for threads to
    # come, a sixteenth of the room at most (none at 100 MiB, two of 4 MiB at 200 sampled).
    margins = {(): 15, ("--full",): 26}
    for limit in (100, 200):
        argv = [program("room_under_limit"), str(limit)]
        plain = untraced(argv)
        m = re.fullmatch(r"(\d+) MiB mappable\n", plain.stdout)
        expect(plain.returncode == 0 and m, f"untraced {argv}: {plain.stdout!r}")
        room = int(m.group(1))
        for options, fixed in margins.items():
            margin = fixed + limit // 16
            trace = os.path.join(WORK, f"room-{limit}.ctf")
            traced = record(trace, argv, options)
            t = re.fullmatch(r"(\d+) MiB mappable\n", traced.stdout)
            expect(traced.returncode == 0 and t, f"traced {argv} {options}: {traced.stdout!r}\n"
                   f"{traced.stderr[-2000:]}")
            got = int(t.group(1))
            expect(got >= room - margin,
                   f"under a {limit} MiB limit set by the program, traced {options} it can map "
                   f"{got} MiB, untraced {room}: more than {margin} MiB less")
            verify_trace(trace)


def test_program_lowering_its_address_space_limit_keeps_its_room():
    # A program that lowers its own RLIMIT_AS once it runs (to 640 MiB) and then maps 384 MiB
    # must do so traced too: the ring file, mapped whole at start (16 GiB sampled, 64 GiB with
    # --full), gives back the rings no thread holds (before, the program's first large malloc
    # failed). The rings kept (a sixteenth of the room: nine of 4 MiB sampled, two of 16 MiB
    # --full, one of them the main thread's) trace a thread started afterwards; threads beyond
    # them run untraced, and memtap says why.
    name = "lowered_limit"
    sources = [name + ".c"]
    worker_line = next(n for n, text in enumerate(open(source(sources[0])), 1)
                       if "malloc(40)" in text)
    for call in ("setrlimit", "prlimit"):
        argv = [program(name), call, "640", "384", "1"]
        plain = untraced(argv)
        expect(plain.stdout == "held 384 MiB, 1 threads\n", f"untraced {argv}: {plain.stdout!r}")
        for options in ((), ("--full",)):
            trace = os.path.join(WORK, f"lowered-{call}.ctf")
            traced = record(trace, argv, options)
            same_behaviour(plain, traced, f"{' '.join(argv)} {options}")
            verify_trace(trace)
            if options:
                f = facts(trace, sources)
                check_summary_line(traced.stderr, trace, f)
                check_sites(f, sources, name, f"{call}, --full")
                got = f["sites"].get(f"{sources[0]}:{worker_line}", {}).get("allocs", 0)
                expect(got == 1000, f"{call}, --full: the thread started after the limit was "
                       f"lowered has {got} of its 1000 allocations in the trace")
    # More threads at once than rings kept: the program runs as untraced, and the lost records
    # are put down to the lowered limit, not to MEMTAP_RING_THREADS.
    argv = [program(name), "setrlimit", "640", "384", "6"]
    plain = untraced(argv)
    expect(plain.stdout == "held 384 MiB, 6 threads\n", f"untraced {argv}: {plain.stdout!r}")
    trace = os.path.join(WORK, "lowered-threads.ctf")
    traced = record(trace, argv)
    same_behaviour(plain, traced, " ".join(argv))
    verify_trace(trace)
    expect("lowered its address-space limit" in traced.stderr and
           "MEMTAP_RING_THREADS" not in traced.stderr,
           f"6 threads after a lowered limit: memtap does not say why records were lost:\n"
           f"{traced.stderr[-2000:]}")
    # In process the consumer thread's own view of the file (a second 16 or 64 GiB mapping) is not
    # given back (its cursor unmaps it whole at the end, which would take what the program mapped
    # in a hole since): the shim says so once, pointing at memtap record, and the trace is whole.
    if A.lib_sanitized:
        return  # libmemtap is sanitized: the shim cannot load it into a plain program
    for full, limit in (("0", "640"), ("1", "2048,640")):
        argv = [program(name), "setrlimit", limit, "384", "1"]
        trace = os.path.join(WORK, "lowered-inprocess.ctf")
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": full}))
        what = f"in process, MEMTAP_FULL={full}, limits {limit} MiB"
        said = [line for line in p.stderr.splitlines() if "lowered its address-space limit" in line]
        expect(p.returncode == 0 and len(said) == 1 and "memtap record instead" in said[0],
               f"{what}: exit {p.returncode}, not said once:\n{p.stderr[-2000:]}")
        verify_trace(trace)
    # A program that closed its standard error and opened a file of its own as descriptor 2: the
    # shim's words must not land in that file (they were appended to it).
    data = os.path.join(WORK, "data-on-fd2.txt")
    trace = os.path.join(WORK, "lowered-inprocess-fd2.ctf")
    argv = [program(name), "setrlimit", "640", "384", "1", data]
    p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace}))
    with open(data) as fh:
        written = fh.read()
    expect(p.returncode == 0 and written == "data\n",
           f"in process, descriptor 2 reused: exit {p.returncode}, the file holds {written!r}")
    verify_trace(trace)


def test_program_locking_its_memory_runs_as_untraced():
    # mlockall(MCL_CURRENT | MCL_FUTURE) locks every mapping, and needs the whole address space
    # under RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK. The shim's ring file (16 to 64
    # GiB of address space) must be left out: with the capability the kernel would fault in and
    # pin all of it, without it the call failed with ENOMEM where the untraced program's succeeds.
    setpriv = shutil.which("setpriv")
    if not setpriv:
        skip("setpriv not found (Debian package util-linux)")
    argv = [program("mlock_all"), "report"]

    def locked_kib(p):
        m = re.search(r"mlock_all: locked (\d+) KiB", p.stderr)
        return int(m.group(1)) if m else None

    for label, wrap in (("with CAP_IPC_LOCK", []),
                        ("without CAP_IPC_LOCK, under ulimit -l 8192",
                         [setpriv, "--bounding-set=-ipc_lock", "--", "sh", "-c",
                          "ulimit -l 8192; exec \"$@\"", "sh"])):
        plain = untraced(wrap + argv)
        expect(plain.stdout == "mlockall: ok\nlocked under 1 GiB: yes\n",
               f"untraced, {label}: {plain.stdout!r}")
        # --sample-interval 64: nearly every block sampled, so the sampled set maps a page of its
        # table after mlockall(MCL_FUTURE); mapped as the program's, it was locked (64 KiB more).
        for options in ((), ("--full",), ("--sample-interval", "64")):
            trace = os.path.join(WORK, "mlock-all.ctf")
            # A small ring file: should its mapping be locked after all, the damage stays small
            # and VmLck still shows it.
            env = base_env({"MEMTAP_RING_THREADS": "16", "MEMTAP_RING_SIZE": "64M"})
            traced = run(record_command(trace, wrap + argv, options), env=env)
            same_behaviour(plain, traced, f"mlock_all {label} {options}")
            verify_trace(trace)
            # Nor are the shim's own objects (its 2.6 MiB of .bss, libm, libunwind): locked, they
            # took the program's RLIMIT_MEMLOCK budget (4 MiB of 8 here), and its later locked
            # allocations failed where untraced they succeed.
            ours, theirs = locked_kib(plain), locked_kib(traced)
            most = 60 if "--sample-interval" in options else 256  # 40 measured, 104 with the page
            expect(ours is not None and theirs is not None and theirs - ours <= most,
                   f"mlock_all {label} {options}: {theirs} KiB locked traced, {ours} untraced")
            if "--full" in options:
                check_sites(facts(trace, ["mlock_all.c"]), ["mlock_all.c"], "all",
                            f"mlock_all {label}")
    # In process too: the consumer thread's second mapping of the ring file is left out as well.
    if A.lib_sanitized:
        return  # libmemtap is sanitized: the shim cannot load it into a plain program
    trace = os.path.join(WORK, "mlock-all-inprocess.ctf")
    p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_RING_THREADS": "16",
                                "MEMTAP_RING_SIZE": "64M"}))
    expect(p.stdout == "mlockall: ok\nlocked under 1 GiB: yes\n" and p.returncode == 0,
           f"in process: exit {p.returncode}, {p.stdout!r}\n{p.stderr[-2000:]}")
    verify_trace(trace)


def test_inprocess_ring_file_goes_however_the_program_ends():
    # In process the ring file lives in $TMPDIR, and was removed only by a normal exit: every
    # program that exec'd, called _exit or died of a signal left its 16 GiB sparse file there (116
    # piled up in one afternoon's runs). Its name now goes once the consumer thread has mapped it.
    if A.lib_sanitized:
        skip("libmemtap is sanitized: the shim cannot load it into a plain program",
             even_under_ci=True)
    ring_dir = os.path.join(WORK, "inprocess-tmp")
    os.mkdir(ring_dir)
    true = shutil.which("true")
    for label, argv, status in (("exit", [program("alloc_patterns")], 0),
                                ("_exit", ["sh", "-c", "exit 3"], 3),  # dash's exit is _exit
                                ("exec", ["sh", "-c", f"exec {true}"], 0),
                                ("SIGKILL", ["sh", "-c", "kill -9 $$"], -9)):
        trace = os.path.join(WORK, f"inprocess-{label}.ctf")
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1",
                                    "TMPDIR": ring_dir}))
        left = os.listdir(ring_dir)
        expect(p.returncode == status and not left,
               f"in process, {label}: exit {p.returncode}, left in $TMPDIR: {left}\n"
               f"{p.stderr[-2000:]}")
        if label == "exit":
            verify_trace(trace)


def test_inprocess_trace_is_whole_however_the_program_ends():
    # In process the trace was finished by an exit handler only: a program that left by _exit
    # (dash's every exit, Python's os._exit, a SIGTERM handler that calls it) or replaced itself by
    # exec left a trace with no event in it. Each end now finishes the trace first; an exec that
    # cannot start (no such file) keeps tracing, and one that fails all the same is said.
    if A.lib_sanitized:
        skip("libmemtap is sanitized: the shim cannot load it into a plain program",
             even_under_ci=True)
    true = shutil.which("true")
    not_elf = os.path.join(WORK, "not-elf")
    with open(not_elf, "wb") as fh:
        fh.write(b"\x7fELF\x02\x01 not a program")
    os.chmod(not_elf, 0o755)
    site = f"ending.c:{marked_lines('ending.c')['kept']}"
    execs = ("execve", "execv", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve",
             "execveat")
    # (label, how, what it runs, exit status, frees of the program's blocks in the trace): an
    # exec that cannot start (no such file, a directory) keeps tracing, so the program's later
    # frees are in the trace too.
    cases = [("_exit", "_exit", true, 3, 20), ("_Exit", "_Exit", true, 4, 20),
             ("handler", "handler", true, 9, 20), *((how, how, true, 0, 20) for how in execs),
             ("not-elf", "not-elf", not_elf, 5, 20), ("missing", "missing", true, 5, 40),
             ("directory", "execv", WORK, 5, 40), ("directory-fd", "fexecve", WORK, 5, 40),
             ("directory-at", "execveat", WORK, 5, 40), ("race", "race", true, (0, 7), 20),
             ("race", "race", true, (0, 7), 20), ("race", "race", true, (0, 7), 20),
             ("quick_exit", "quick_exit", true, 6, 20), ("daemon", "daemon", true, 0, 20),
             ("pthread-exit", "pthread-exit", true, 0, 40),
             # a signal's default action (the exit status a Python child reads: -signal)
             ("segv", "segv", true, -signal.SIGSEGV, 20),
             ("abort", "abort", true, -signal.SIGABRT, 20),
             ("term", "term", true, -signal.SIGTERM, 20),
             ("pipe", "pipe", true, -signal.SIGPIPE, 20),
             *(("busy-exec", "busy-exec", true, -signal.SIGTERM, 20) for _ in range(3))]
    for label, how, target, status, frees in cases:
        trace = os.path.join(WORK, f"ending-{label}.ctf")
        argv = [program("ending"), how, target]
        # (a process that never ends, as pthread-exit's did, times out)
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1"}),
                timeout=60)
        # (exit and _exit racing: either status, and the trace whole, finished by one while the
        # other waits)
        expect(p.returncode in (status if isinstance(status, tuple) else (status,)),
               f"in process, {label}: exit {p.returncode}, not {status}\n{p.stderr[-2000:]}")
        verify_trace(trace)
        f = facts(trace, ["ending.c"])
        check_sites(f, ["ending.c"], "all", f"in process, {label}")
        got = f["sites"].get(site, {}).get("collects")
        expect(got == frees, f"in process, {label}: {got} frees of the program's blocks, not {frees}")
        said = "the trace ended before an exec" in p.stderr
        expect(said == (label == "not-elf"),
               f"in process, {label}: the failed exec {'was' if said else 'was not'} said\n"
               f"{p.stderr[-2000:]}")
    # SIGTERM from outside while the program allocates without a pause: it mostly lands inside
    # malloc, which then holds a lock the consumer thread needs to finish the trace. The program
    # must end at once, with the signal's status and a whole trace (it once waited 10 s for the
    # consumer in 8 of 14 runs, and the trace stopped at its last flush).
    # The second of two signals sent at once is one too many (it made the first version wait 10 s
    # as well): the first one's status, at once.
    for attempt, signals in enumerate([[signal.SIGTERM]] * 5 + [[signal.SIGINT, signal.SIGTERM]] * 3):
        trace = os.path.join(WORK, f"ending-busy-{attempt}.ctf")
        env = base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1"})
        proc = subprocess.Popen([program("ending"), "busy", true], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.1)
        sent = time.monotonic()
        for sig in signals:
            proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail(f"in process, busy: still running 60 s after SIGTERM")
        took = time.monotonic() - sent
        # (5 s: the fault was a 10 s wait for the consumer; finishing the trace itself takes
        # 0.1-0.3 s, several times that when the test runs beside a loaded machine's builds)
        expect(proc.returncode == -signals[0] and took < 5,
               f"in process, busy (run {attempt + 1}): exit {proc.returncode} {took:.2f} s after "
               f"SIGTERM\n{err[-2000:]}")
        f = facts(trace, ["ending.c"])  # (not verify_trace: dumping millions of events is slow)
        expect(f["read_ok"] and not f["truncated"] and not f["error_count"],
               f"in process, busy (run {attempt + 1}): the trace does not read whole: {f}"[:2000])
        got = f["sites"].get(site, {}).get("allocs")
        expect(got == 40, f"in process, busy (run {attempt + 1}): {got} of the 40 allocations")
    # unshare(CLONE_NEWUSER) wants the process single-threaded: the consumer thread made it fail
    # (unshare -U: "Invalid argument", exit 1). The trace ends before it, said, and the call works.
    unshare = shutil.which("unshare")
    plain = untraced([unshare, "-U", "id", "-u"]) if unshare else None
    if plain is not None and plain.returncode == 0:
        trace = os.path.join(WORK, "ending-unshare.ctf")
        p = run([unshare, "-U", "id", "-u"],
                env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1"}))
        same_behaviour(plain, p, "in process, unshare -U")
        expect("the trace ended before unshare(CLONE_NEWUSER)" in p.stderr,
               f"in process, unshare -U: the end of the trace was not said\n{p.stderr}")
        verify_trace(trace)


def test_inprocess_unstarted_trace_leaves_no_file():
    # In process (MEMTAP=) under a file size limit below the smallest ring file: the program runs
    # untraced, the shim says why, and the trace file it opened (emptied, as memtrace does) is
    # removed rather than left as an empty file that no reader accepts.
    argv = [program("threads"), "cross"]
    trace = os.path.join(WORK, "limit-f-inprocess.ctf")
    # (the variables set after the limit: a traced sh would trace itself into the file)
    p = run(["sh", "-c", "ulimit -f 1000; exec \"$@\"", "sh", "env", f"LD_PRELOAD={A.shim}",
             f"MEMTAP={trace}", "MEMTAP_FULL=1", *argv], env=base_env())
    expect(p.returncode == 0 and p.stdout == untraced(argv).stdout,
           f"threads cross in process under ulimit -f: exit {p.returncode}\n{p.stderr[-2000:]}")
    expect("not tracing" in p.stderr and "file size limit" in p.stderr,
           f"the shim did not say why it is not tracing:\n{p.stderr[-2000:]}")
    expect(not os.path.exists(trace), f"an empty trace file was left at {trace}")


def test_record_without_a_ring_directory_says_so_and_runs_nothing():
    # TMPDIR where no directory can be made: memtap cannot trace, so it says what to change and
    # exits 1 before the program runs (a run nobody can see the memory of is a run wasted).
    marker = os.path.join(WORK, "ran")
    p = run(record_command(os.path.join(WORK, "no-dir.ctf"), ["touch", marker]),
            env=dict(base_env(), TMPDIR="/nonexistent/memtap-test"))
    expect(p.returncode == 1 and "TMPDIR" in p.stderr and "was not run" in p.stderr,
           f"unusable TMPDIR: exit {p.returncode}\n{p.stderr[-2000:]}")
    expect(not os.path.exists(marker), "the program ran although nothing could be traced")


def test_sandboxed_program_runs_as_untraced():
    # A program that installs a seccomp filter killing it at any system call not on its list
    # (through prctl, or the seccomp system call as libseccomp makes it) was killed traced: the
    # shim's own calls at thread start (pthread_getattr_np's sched_getaffinity, the ring file) are
    # not on the list. Tracing stops before such a filter goes in, said once; the trace holds
    # what came before it. (The workers' allocations are kept from the optimiser: KEEP.)
    message = "installs a seccomp filter: tracing stops here"
    for how in ("prctl", "syscall"):
        argv = [program("sandboxed"), how]
        plain = untraced(argv)
        expect(plain.returncode == 0 and plain.stdout.startswith("sandboxed: total"),
               f"sandboxed {how} untraced: exit {plain.returncode} {plain.stderr[-500:]}")
        for options in ((), ("--full",), ("--full", "--follow-fork")):
            trace = os.path.join(WORK, f"sandboxed-{how}{len(options)}.ctf")
            traced = record(trace, argv, options)
            same_behaviour(plain, traced, f"sandboxed {how} {options}")
            expect(traced.stderr.count(message) == 1,
                   f"sandboxed {how} {options}: not said once:\n{traced.stderr[-2000:]}")
            f = verify_trace(trace)
            if "--full" in options:
                allocs = json.loads(run([A.memtap, "info", "--json", trace]).stdout)["events"]
                expect(1000 <= allocs["alloc_ext"] < 2000,
                       f"sandboxed {how} {options}: {allocs['alloc_ext']} allocations traced, "
                       f"the 1000 before the filter expected")
    if A.lib_sanitized:
        return  # libmemtap is sanitized: the shim cannot load it into a plain program
    # A filter that can only make calls fail (EPERM), as container runtimes' profiles do: the
    # tracer copes with its own calls failing (a thread's stack unknown, its ring reserved through
    # the mapping), and traces on.
    argv = [program("sandboxed"), "errno"]
    plain = untraced(argv)
    trace = os.path.join(WORK, "sandboxed-errno.ctf")
    traced = record(trace, argv, ("--full",))
    same_behaviour(plain, traced, "sandboxed errno --full")
    expect(message not in traced.stderr, f"sandboxed errno: tracing stopped:\n{traced.stderr}")
    verify_trace(trace)
    allocs = json.loads(run([A.memtap, "info", "--json", trace]).stdout)["events"]["alloc_ext"]
    expect(allocs >= 81001, f"sandboxed errno --full: {allocs} allocations traced, 81,001 made")
    # In process, the trace is finished before the filter (its consumer thread writes files).
    trace = os.path.join(WORK, "sandboxed-inprocess.ctf")
    argv = [program("sandboxed"), "syscall"]
    p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1"}))
    same_behaviour(untraced(argv), p, "sandboxed syscall in process")
    expect(message in p.stderr, f"in process: not said:\n{p.stderr[-2000:]}")
    verify_trace(trace)


def test_program_inherits_ignored_signals():
    # What memtap record was started with (nohup ignores HUP; a shell's background job INT and
    # QUIT) reaches the program as it would untraced.
    argv = [program("threads"), "signals"]
    ignore = "trap '' HUP INT QUIT; exec \"$@\""
    plain = run(["sh", "-c", ignore, "sh", *argv], env=base_env())
    expect(plain.stdout.startswith("ignored: HUP INT QUIT"), f"untraced: {plain.stdout}")
    trace = os.path.join(WORK, "signals.ctf")
    traced = run(["sh", "-c", ignore, "sh", *record_command(trace, argv)], env=base_env())
    same_behaviour(plain, traced, "threads signals under trap '' HUP INT QUIT")


def test_inprocess_program_closing_its_descriptors_keeps_its_files():
    # The same program tracing itself (MEMTAP=): it closes every descriptor it inherited, the
    # trace's among them, and puts its own file on the numbers. The consumer thread's descriptors
    # live in a table of its own: nothing is written into the program's file (before or at exit,
    # where the trace is finished), and the trace is whole.
    if A.lib_sanitized:
        skip("libmemtap.so is a sanitizer build: in-process mode cannot start (the plain builds "
             "run this test)", even_under_ci=True)
    own = os.path.join(WORK, "own-file")
    trace = os.path.join(WORK, "inprocess-closefds.ctf")
    argv = [program("threads"), "closefds", own]
    plain = untraced(argv)
    p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_RATE": "1"}))
    same_behaviour(plain, p, "threads closefds (in process)")
    with open(own, "rb") as f:
        content = f.read()
    expect(content == b"the program's own file",
           f"the program's own file holds {len(content)} bytes after tracing itself: "
           f"{content[:80]!r}")
    verify_trace(trace)
    check_sites(facts(trace, ["threads.c"]), ["threads.c"], "closefds", "threads closefds (in "
                "process)")


def test_full_lifecycle_constructor_atexit_destructor():
    full_program("lifecycle")


def test_full_library_destructor_frees_are_traced():
    # libslow_fini.so frees in its destructor the 7 blocks its constructor allocated. glibc's
    # _dl_fini runs the preloaded shim's destructors before it, and the ring's exit handler ran
    # among them (an atexit of a shared object runs as that object is finalised): the frees were
    # lost and the blocks read as leaks (curl --version: 700 of them). The close now runs after
    # every library's destructor.
    full_program("slow_fini", sources=["slow_fini.c", "slow_fini_lib.c"])


def test_small_stack_thread_allocates_near_its_end():
    # small_stack recurses on a 64 KiB thread stack until MARGIN bytes are left, then calls every
    # allocation function the shim records, and forks. First the smallest margin that works
    # untraced (in steps of 64 bytes), then every tracing mode must work with --stack-allowance
    # more: a program that fits its stacks tightly must not die of a stack overflow because it is
    # traced. (A record used to be built in a 2 KiB buffer on the stack.) The tracer's records of
    # up to 256 frames are built in a per-thread page; what is left is its call chain, which in
    # the optimised builds runs beside glibc's deepest paths, not below them (1 KiB allowed); an
    # unoptimised build's frames are larger (3 KiB allowed).
    argv = [program("small_stack")]
    fits = lambda margin, env=None: run(argv + [str(margin)], env=env or base_env())
    low, high = 0, 16384
    expect(fits(high).returncode == 0, f"small_stack fails untraced with {high} bytes to spare")
    while high - low > 64:
        mid = (low + high) // 2
        if fits(mid).returncode == 0:
            high = mid
        else:
            low = mid
    margin = str(high + A.stack_allowance)
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    trace = os.path.join(directory, "small_stack.ctf")
    for options in (("--full",), ("--sample-interval", "8"), ("--full", "--follow-fork")):
        traced = record(trace, argv + [margin], options)
        expect(traced.returncode == 0 and traced.stdout == "ok\n",
               f"small_stack with {margin} bytes of stack to spare (untraced: {high}) under "
               f"memtap record {' '.join(options)}: exit {traced.returncode}, stdout "
               f"{traced.stdout!r}\nstderr:\n{traced.stderr[-2000:]}")
        verify_trace(trace)
        for path in trace_files(directory):
            os.unlink(path)
    if not A.lib_sanitized:
        inproc = run(argv + [margin], env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace,
                                                     "MEMTAP_FULL": "1"}))
        expect(inproc.returncode == 0 and inproc.stdout == "ok\n",
               f"small_stack with {margin} bytes to spare, tracing itself: exit "
               f"{inproc.returncode}\nstderr:\n{inproc.stderr[-2000:]}")
        verify_trace(trace)


def test_full_fork_without_follow_traces_parent_only():
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    argv = [program("procs"), "all", program("alloc_patterns")]
    plain = untraced(argv)
    trace = os.path.join(directory, "procs.ctf")
    traced = record(trace, argv)
    same_behaviour(plain, traced, "procs all")
    files = trace_files(directory)
    expect(files == [trace], f"without --follow-fork only the parent's trace is written: {files}")
    verify_trace(trace)
    f = facts(trace, ["procs.c", "alloc_patterns.c"])
    check_sites(f, ["procs.c"], "parent", "procs all (parent)")
    # The four children (fork, fork-exec, vfork-exec, spawn) went untraced: memtap says so once,
    # with the programs they ran, and points at --follow-fork.
    notes = [line for line in traced.stderr.splitlines() if "not traced" in line]
    expect(len(notes) == 1 and "4 processes that procs started were not traced" in notes[0]
           and "procs" in notes[0].split("(", 1)[-1] and "alloc_patterns" in notes[0]
           and f"--follow-fork traces each into {trace}.<pid>" in notes[0],
           f"expected one note of the 4 untraced children, got:\n{traced.stderr[-2000:]}")
    # A program that empties its environment (clearenv) before it forks: the child's note is made
    # where the process started with (it once looked for MEMTAP_RING_DIR then, found nothing and
    # left no note: the child went unmentioned).
    cleared = record(trace, [program("procs"), "clearenv", "-"])
    expect("1 process that procs started was not traced" in cleared.stderr,
           f"procs clearenv: no note of the untraced child:\n{cleared.stderr[-2000:]}")
    # A process is named by one program, the last it was seen running: a shell's children are
    # noted as the shell when they fork and as what they exec'd after (the note named four
    # programs for these three processes). Which of the two memtap saw last for a child that
    # exec'd just before the end is a race, so only the count of names is certain.
    pipeline = record(trace, ["sh", "-c", "seq 2000 | sort -n | tail -1"], ())
    notes = [line for line in pipeline.stderr.splitlines() if "not traced" in line]
    names = notes[0].split("(", 1)[-1].split(")", 1)[0].split(", ") if notes else []
    expect(len(notes) == 1 and "3 processes that sh started were not traced" in notes[0]
           and 1 <= len(names) <= 3 and set(names) <= {"seq", "sort", "tail", "dash", "sh"},
           f"a pipeline's 3 children are named by more programs than they are:\n"
           f"{pipeline.stderr[-2000:]}")
    followed = record(trace, argv, ("--full", "--follow-fork"))
    expect("not traced" not in followed.stderr,
           f"with --follow-fork no process goes untraced:\n{followed.stderr[-2000:]}")
    # A note is the traced program's to write: what it holds is printed without its control
    # characters, which could otherwise drive the user's terminal.
    # (Written aside and renamed into place: memtap may scan between the shell's creating the
    # file and its writing to it, and pid 4242 has no /proc entry to fall back on. mv, forked,
    # leaves a note of its own.)
    forged = record(trace, ["sh", "-c", 'printf "/bin/ev\\033[31mil\\n" > "$MEMTAP_RING_DIR/forged" '
                            '&& mv "$MEMTAP_RING_DIR/forged" "$MEMTAP_RING_DIR/4242.untraced"'],
                    ("--full",))
    notes = [line for line in forged.stderr.splitlines() if "not traced" in line]
    expect(len(notes) == 1 and "ev?[31mil?" in notes[0] and "\x1b" not in forged.stderr,
           f"a forged note's control characters reach the terminal:\n{forged.stderr!r}")
    # A child forked just before the program ends (a shell's background job) has not always
    # written its note by then: memtap waits for a note per fork (it lost 6 in 10 such lines).
    for run_number in range(5):
        background = record(trace, ["sh", "-c", "sleep 1 & echo hi"], ())
        expect("1 process that sh started was not traced" in background.stderr,
               f"run {run_number}: the background child went unsaid:\n{background.stderr!r}")


def test_full_fork_exec_vfork_spawn_with_follow_fork():
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    argv = [program("procs"), "all", program("alloc_patterns")]
    plain = untraced(argv)
    trace = os.path.join(directory, "procs.ctf")
    traced = record(trace, argv, ("--full", "--follow-fork"))
    same_behaviour(plain, traced, "procs all --follow-fork")
    # A forked child that frees its parent's blocks: its closing line says what its unknown frees
    # are (the parent's does not).
    trace = os.path.join(WORK, "fork-frees.ctf")
    p = record(trace, [program("procs"), "fork-frees", "-"], ("--full", "--follow-fork"))
    note = "(blocks allocated before its trace began: its parent's, from before the fork)"
    lines = [line for line in p.stderr.splitlines() if "unknown free" in line]
    child = [line for line in lines if "fork-frees.ctf." in line]
    parent = [line for line in lines if "fork-frees.ctf:" in line]
    expect(len(child) == 1 and " 10 unknown frees" in child[0] and note in child[0] and
           len(parent) == 1 and note not in parent[0], f"fork-frees closing lines: {lines}")
    for path in trace_files(WORK):
        if os.path.basename(path).startswith("fork-frees.ctf."):
            os.unlink(path)
    trace = os.path.join(directory, "procs.ctf")
    files = trace_files(directory)
    # fork, fork-exec, vfork-exec and spawn: four children, each with its own trace FILE.<pid>. A
    # process that execs starts its trace over (docs/record.md, "exec"): the fork-exec child's
    # trace is alloc_patterns', without what the child did before exec.
    expect(trace in files and len(files) >= 5,
           f"--follow-fork: expected the parent's trace {trace} and at least 4 children's, got "
           f"{files}\nrecord's stderr:\n{traced.stderr[-2000:]}")
    check_sites(facts(trace, ["procs.c", "alloc_patterns.c"]), ["procs.c"], "parent",
                "procs all (parent trace)")
    pids = {}
    total = {}
    for path in files:
        pids[path] = verify_trace(path)["pid"]
        for site, g in facts(path, ["procs.c", "alloc_patterns.c"])["sites"].items():
            t = total.setdefault(site, {"allocs": 0, "collects": 0, "words": 0})
            for k in t:
                t[k] += g[k]
    # Over all traces: the parent's work once, the forked child's work once (fork; fork-exec's is
    # replaced by its exec'd image), alloc_patterns three times (fork-exec, vfork-exec, spawn).
    wanted = {}
    for name, mode, scale in (("procs.c", "parent", 1), ("procs.c", "child", 1),
                              ("alloc_patterns.c", "all", 3)):
        for site, want in expectations([name], mode).items():
            if mode == "child" and site in wanted:
                continue  # the parent's own line, already counted once
            wanted[site] = {k: v * scale for k, v in want.items() if isinstance(v, int)}
    problems = []
    for site, want in sorted(wanted.items()):
        got = total.get(site, {"allocs": 0, "collects": 0, "words": 0})
        for key, field in (("allocs", "allocs"), ("frees", "collects"), ("words", "words")):
            if key in want and got[field] != want[key]:
                problems.append(f"{site}: {key} over all traces expected {want[key]}, "
                                f"got {got[field]}")
    for path, pid in pids.items():
        suffix = path.rsplit(".", 1)[-1]
        if suffix.isdigit() and int(suffix) != pid:
            problems.append(f"{os.path.basename(path)}: trace_info says pid {pid}")
    if problems:
        fail("--follow-fork traces wrong:\n  " + "\n  ".join(problems))


def shim_for_others():
    """A copy of the shim that another user can load: the build tree may lie in a directory only
    its owner can enter (a fresh clone in a mkdtemp directory), as an installed shim never does.
    Returns the environment that makes memtap record preload it."""
    os.chmod(WORK, 0o711)
    place = os.path.join(WORK, "shim")
    os.makedirs(place, exist_ok=True)
    os.chmod(place, 0o755)
    copy = os.path.join(place, os.path.basename(A.shim))
    shutil.copy(A.shim, copy)
    os.chmod(copy, 0o755)
    return {"MEMTAP_PRELOAD": copy}


def test_full_processes_that_become_another_user_keep_their_traces():
    # A server started as root becomes another user, then forks workers or execs the real program
    # (nginx, Apache, setpriv, runuser). memtap's ring directory was root's alone: the worker went
    # untraced without a word, and the exec'd program too (said). The process about to leave root
    # now hands the directory, and its own ring file, to its new user.
    if os.geteuid() != 0:
        skip("only root can change its user", even_under_ci=True)
    nobody = 65534
    # The program, the shim and the ring directory where that user can reach them.
    shim = shim_for_others()
    shared = os.path.join(WORK, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o711)
    exe = os.path.join(shared, "dropped")
    shutil.copy(program("dropped"), exe)
    os.chmod(exe, 0o755)
    rings = os.path.join(shared, "tmp")
    os.mkdir(rings)
    os.chmod(rings, 0o711)
    for how in ("setuid", "seteuid", "setreuid", "setresuid"):
        argv = [exe, str(nobody), how]
        plain = untraced(argv)
        expect(plain.returncode == 0, f"dropped {how} untraced: exit {plain.returncode}\n"
               f"{plain.stderr}")
        directory = os.path.join(WORK, f"out-{how}")
        os.mkdir(directory)
        trace = os.path.join(directory, "dropped.ctf")
        traced = record(trace, argv, ("--full", "--follow-fork"),
                        env=base_env({"TMPDIR": rings, **shim}))
        same_behaviour(plain, traced, f"dropped {how}")
        files = trace_files(directory)
        expect(len(files) == 2 and trace in files,
               f"dropped {how}: expected its trace and its worker's, got {files}\n"
               f"{traced.stderr[-2000:]}")
        for path in files:
            f = verify_trace(path)
            check_summary_line(traced.stderr, path, f)
            # The worker's trace, and the program's: the image it exec'd as the other user (an
            # exec starts the process's trace over), or with seteuid (no exec) what it did before.
            mode = "worker" if path != trace else "parent" if how == "seteuid" else "image"
            check_sites(facts(path, ["dropped.c"]), ["dropped.c"], mode,
                        f"dropped {how}, {os.path.basename(path)}")
        expect("cannot write memtap's ring" not in traced.stderr and
               "not tracing" not in traced.stderr,
               f"dropped {how}: memtap said a process went untraced\n{traced.stderr[-2000:]}")
    # The ring directory stays root's: the user cannot move it away and put a link to another
    # directory in its place, which memtap, removing the directory as root, would have emptied.
    victim = os.path.join(shared, "victim")
    os.mkdir(victim)
    with open(os.path.join(victim, "keep"), "w") as fh:
        fh.write("x")
    swap = ('if mv "$MEMTAP_RING_DIR" "$MEMTAP_RING_DIR.moved" 2>/dev/null; then echo moved; '
            f'ln -s {victim} "$MEMTAP_RING_DIR"; fi')
    trace = os.path.join(WORK, "swap.ctf")
    sticky = os.path.join(shared, "sticky")  # as /tmp is: anyone may add, owners rename theirs
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    traced = record(trace, ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                            "--", "sh", "-c", swap], env=base_env({"TMPDIR": sticky, **shim}))
    expect("moved" not in traced.stdout, "the traced user could move memtap's ring directory")
    expect(os.path.exists(os.path.join(victim, "keep")),
           f"a file of a directory the traced user linked in place of the ring directory was "
           f"removed\n{traced.stderr[-2000:]}")


def program_traces(directory, exe, stderr=None, source=None, what=""):
    """Every trace in `directory`, verified (and its closing line checked against record's
    `stderr`, when given). Returns ([(path, facts)] of the traces of program `exe`, the same of the
    others); with `source`, each trace of `exe` has the per-site counts its @expect lines say."""
    ours, others = [], []
    for path in trace_files(directory):
        f = verify_trace(path)
        if stderr is not None:
            check_summary_line(stderr, path, f)
        if f["executable"] == os.path.realpath(exe):
            ours.append((path, f))
            if source:
                check_sites(facts(path, [source]), [source], "all",
                            f"{os.path.basename(exe)} {what} ({os.path.basename(path)})")
        else:
            others.append((path, f))
    return ours, others


def test_processes_of_other_pid_namespaces_each_keep_their_trace():
    # Sandboxes and containers (`unshare --pid --fork`, bubblewrap, a build's sandbox) give the
    # processes in them pids that processes elsewhere have too: here three programs are all pid 1,
    # two at once in namespaces of their own and a third after them. Each must get its own complete
    # trace, named by its pid in memtap's namespace. The rings are as small as they can be
    # (MEMTAP_RING_SIZE), so each program fills them and waits for memtap, which such a process
    # cannot see by its pid: it must not take memtap for dead and lose records.
    if run(["unshare", "--pid", "--fork", "true"]).returncode != 0:
        skip("cannot make a pid namespace here (unshare --pid needs CAP_SYS_ADMIN)",
             even_under_ci=True)
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    ap = program("alloc_patterns")
    argv = ["sh", "-c", f"unshare --pid --fork {ap} & unshare --pid --fork {ap}; wait; "
                        f"unshare --pid --fork {ap}"]
    plain = untraced(argv)
    trace = os.path.join(directory, "ns.ctf")
    traced = record(trace, argv, ("--full", "--follow-fork"),
                    env=base_env({"MEMTAP_RING_SIZE": "8K"}))
    same_behaviour(plain, traced, "three programs in pid namespaces", compare_stdout=False)
    expect(sorted(plain.stdout.splitlines()) == sorted(traced.stdout.splitlines()),
           f"the programs' output differs under memtap record:\n{traced.stdout[-2000:]}")
    ours, _ = program_traces(directory, ap, traced.stderr, "alloc_patterns.c", "in a pid namespace")
    for path, f in ours:
        expect(f["pid"] == 1, f"{path}: trace_info says pid {f['pid']}, not its pid 1")
    expect(len(ours) == 3,
           f"expected three traces of alloc_patterns, one per namespace, got {len(ours)}: "
           f"{trace_files(directory)}\nrecord's stderr:\n{traced.stderr[-2000:]}")
    names = [os.path.basename(p) for p, _ in ours]
    expect(all(re.fullmatch(r"ns\.ctf\.\d+(\.\d+)?", n) and not n.endswith(".1") for n in names),
           f"traces of processes memtap can see are named by their pid in its namespace: {names}")

    # A pid used again in one namespace: the second program gets the first one's pid (2, after the
    # shell's 1) and so the same ring file name. It is another process, not an exec of the first:
    # both traces are kept whole.
    directory = os.path.join(WORK, "reuse")
    os.mkdir(directory)
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
            f"{ap}; echo 1 > /proc/sys/kernel/ns_last_pid && {ap}"]
    trace = os.path.join(directory, "reuse.ctf")
    traced = record(trace, argv, ("--full", "--follow-fork"),
                    env=base_env({"MEMTAP_RING_SIZE": "8K"}))
    same_behaviour(untraced(argv), traced, "a pid used again in a pid namespace")
    ours, _ = program_traces(directory, ap, None, "alloc_patterns.c", "with a pid used again")
    pids = [f["pid"] for _, f in ours]
    expect(pids == [2, 2], f"expected two traces of alloc_patterns, both of pid 2 in their "
           f"namespace, got pids {pids}: {trace_files(directory)}\n{traced.stderr[-2000:]}")

    # Sandboxes one after another, sampled (no program waits for memtap to read its file): the
    # kernel gives each new namespace the freed one's inode number, so each first process wants
    # its predecessor's file name, and must not take that dead process's file for its own.
    directory = os.path.join(WORK, "one_after_another")
    os.mkdir(directory)
    # Half of them exec alloc_patterns from a shell that lived long enough to be seen: such a
    # process may make its file under one name (PID.K, its predecessor's file had the plain name)
    # and, after the exec, under the other. Its trace is the exec'd program's, whole, in one file.
    argv = ["sh", "-c", f"for i in 1 2 3 4 5; do unshare --pid --fork {ap} >/dev/null; "
                        f"sleep 0.02; unshare --pid --fork sh -c 'sleep 0.1; exec {ap}' >/dev/null; "
                        f"sleep 0.02; done"]
    trace = os.path.join(directory, "seq.ctf")
    traced = record(trace, argv, ("--follow-fork",))
    same_behaviour(untraced(argv), traced, "ten pid namespaces one after another")
    ours, others = program_traces(directory, ap)
    split = [f"{os.path.basename(p)} ({f['executable']})" for p, f in others if f["pid"] == 1]
    expect(len(ours) == 10, f"expected ten traces of alloc_patterns, one per namespace, got "
           f"{len(ours)}: {trace_files(directory)}\n{traced.stderr[-2000:]}")
    expect(not split, f"a namespace's first process left a trace of its image before its exec "
           f"beside the exec'd program's: {split}")
    expect("warning" not in traced.stderr, f"record warned:\n{traced.stderr[-2000:]}")

    # Without --follow-fork, the note of untraced processes counts each namespace's pid 1 apart:
    # three unshare and the three programs they ran, each pid 1 in a namespace of its own.
    directory = os.path.join(WORK, "untraced")
    os.mkdir(directory)
    argv = ["sh", "-c", f"unshare --pid --fork {ap} >/dev/null; unshare --pid --fork true; "
                        f"unshare --pid --fork echo hi"]
    traced = record(os.path.join(directory, "u.ctf"), argv, ("--full",))
    same_behaviour(untraced(argv), traced, "untraced processes in pid namespaces")
    note = re.search(r"note: (\d[\d,]*) processes that sh started were not traced \(([^)]*)\)",
                     traced.stderr)
    expect(note and note.group(1) == "6" and
           sorted(note.group(2).split(", ")) == ["alloc_patterns", "echo", "true", "unshare"],
           f"expected the note to count six processes, of four programs:\n{traced.stderr[-2000:]}")


def test_program_in_a_time_namespace_is_traced_whole():
    # A program started in a time namespace (unshare --time, as some sandboxes and checkpoint
    # tools do) reads every start time in /proc shifted by its boottime offset, memtap's among
    # them: a full ring must not take memtap for dead (the tracer then stops for good) nor memtap
    # take the running program for gone. Rings of 8 KiB make the program wait for memtap often.
    if run(["unshare", "--time", "--fork", "--boottime", "1000", "true"]).returncode != 0:
        skip("cannot make a time namespace here (unshare --time needs Linux 5.6 and "
             "CAP_SYS_ADMIN)", even_under_ci=True)
    ap = program("alloc_patterns")
    argv = ["unshare", "--time", "--fork", "--boottime", "1000", "sh", "-c", f"sleep 0.1; exec {ap}"]
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    trace = os.path.join(directory, "time.ctf")
    traced = record(trace, argv, ("--full", "--follow-fork"),
                    env=base_env({"MEMTAP_RING_SIZE": "8K"}))
    same_behaviour(untraced(argv), traced, "alloc_patterns in a time namespace")
    ours, _ = program_traces(directory, ap, traced.stderr, "alloc_patterns.c",
                             "in a time namespace")
    expect(len(ours) == 1, f"expected one trace of alloc_patterns, got {len(ours)}: "
           f"{trace_files(directory)}\n{traced.stderr[-2000:]}")


def test_follow_fork_traces_more_processes_than_descriptors():
    # A build traced with --follow-fork runs hundreds of processes, many at once, where the usual
    # soft limit on descriptors is 1024: memtap holds some for each process it traces. It raises
    # its own soft limit to the hard one (the program keeps the limit it was given), and lets a
    # process's descriptors go once it has ended and its ring was read.
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        skip(f"the hard limit on descriptors here is {hard}", even_under_ci=True)
    for name, limits, script, processes in (
            ("ended", (512, 512), "ulimit -n; for i in $(seq 600); do /bin/true; done", 600),
            ("at once", (64, hard if hard == resource.RLIM_INFINITY else min(hard, 4096)),
             "ulimit -n; for i in $(seq 100); do sleep 0.5 & done; wait", 100)):
        directory = os.path.join(WORK, name.replace(" ", "_"))
        os.mkdir(directory)
        trace = os.path.join(directory, "many.ctf")
        argv = ["sh", "-c", script]
        def limit(limits=limits):
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        plain = subprocess.run(argv, env=base_env(), capture_output=True, text=True,
                               preexec_fn=limit, timeout=120)
        traced = subprocess.run(record_command(trace, argv, ("--follow-fork",)), env=base_env(),
                                capture_output=True, text=True, preexec_fn=limit, timeout=240)
        expect(plain.stdout == f"{limits[0]}\n", f"untraced, the shell's limit is {plain.stdout!r}")
        same_behaviour(plain, traced, f"{processes} processes ({name}) under a limit of "
                       f"{limits[0]} descriptors")
        expect("could not be written" not in traced.stderr and "cannot" not in traced.stderr,
               f"{name}: memtap could not trace every process:\n{traced.stderr[-1500:]}")
        files = trace_files(directory)
        expect(len(files) == processes + 2,
               f"{name}: expected a trace for the shell, its $(seq) and each of its {processes} "
               f"other children, "
               f"got {len(files)}\n{traced.stderr[-1500:]}")
        no_rings_left()


def test_full_clone_child_gets_its_own_trace():
    # glibc's clone() without CLONE_VM makes a process but runs no fork handler: the child used
    # to write its records into the ring its parent's thread owned, as the parent. Its records
    # turned up in the parent's trace, and two writers on one ring could leave the lossless
    # parent waiting for ever. Now it is treated as a forked child: untraced without
    # --follow-fork, its own trace with it.
    argv = [program("procs"), "clone", "unused"]
    plain = untraced(argv)
    for follow in (False, True):
        directory = os.path.join(WORK, "clone-follow" if follow else "clone")
        os.mkdir(directory)
        trace = os.path.join(directory, "procs.ctf")
        options = ("--full", "--follow-fork") if follow else ("--full",)
        traced = record(trace, argv, options, timeout=120)
        same_behaviour(plain, traced, f"procs clone {options}")
        files = trace_files(directory)
        expect(files == ([trace] + [p for p in files if p != trace] if follow else [trace]) and
               len(files) == (2 if follow else 1),
               f"procs clone {options}: traces {files}\n{traced.stderr[-2000:]}")
        check_sites(facts(trace, ["procs.c"]), ["procs.c"], "clone-parent",
                    f"procs clone {options} (parent)")
        parent_sites = facts(trace, ["procs.c"])["sites"]
        child_line = [site for site in expectations(["procs.c"], "clone")
                      if site not in expectations(["procs.c"], "clone-parent")]
        leaked = {site: parent_sites[site]["allocs"] for site in child_line if site in parent_sites}
        expect(not leaked, f"the clone child's allocations are in the parent's trace: {leaked}")
        if follow:
            child = [p for p in files if p != trace][0]
            verify_trace(child)
            got = facts(child, ["procs.c"])["sites"]
            for site in child_line:
                want = expectations(["procs.c"], "clone")[site]
                have = got.get(site, {"allocs": 0, "collects": 0})
                expect(have["allocs"] == want["allocs"] and have["collects"] == want["frees"],
                       f"the clone child's trace at {site}: {have}, expected {want}")


def test_raw_clone_child_runs_untraced_and_is_said():
    # The clone system call called directly (no CLONE_VM) makes a copy of the process that no
    # fork handler sees and no interposer can catch: the child went on writing into the ring its
    # parent's thread owned. Under --full the two processes hung for ever (two writers on one
    # lossless ring). The shim's owner page, wiped by the kernel in such a child, now tells it:
    # the child runs untraced, its allocations stay out of the parent's trace, memtap says so.
    argv = [program("procs"), "raw-clone", "unused"]
    plain = untraced(argv)
    child_lines = [site for site in expectations(["procs.c"], "raw-clone")
                   if site not in expectations(["procs.c"], "clone-parent")]
    for options in (("--full",), ("--full", "--follow-fork"), ("--sample-interval", "8")):
        directory = os.path.join(WORK, "raw-clone" + "".join(options).replace("-", "_"))
        os.mkdir(directory)
        trace = os.path.join(directory, "procs.ctf")
        traced = record(trace, argv, options, timeout=60)
        same_behaviour(plain, traced, f"procs raw-clone {options}")
        files = trace_files(directory)
        expect(files == [trace], f"procs raw-clone {options}: traces {files}")
        if options[0] == "--full":
            check_sites(facts(trace, ["procs.c"]), ["procs.c"], "clone-parent",
                        f"procs raw-clone {options} (parent)")
        sites = facts(trace, ["procs.c"])["sites"]
        leaked = {site: sites[site]["allocs"] for site in child_lines if site in sites}
        expect(not leaked, f"procs raw-clone {options}: the child's allocations are in the "
                           f"parent's trace: {leaked}")
        # --follow-fork cannot trace such a copy either: the note never points at it.
        expect("1 process that procs started was not traced (procs): made by the clone system "
               "call, which runs no fork handler" in traced.stderr and
               "--follow-fork traces" not in traced.stderr,
               f"procs raw-clone {options}: no note of the untraced child:\n"
               f"{traced.stderr[-2000:]}")


def test_full_double_fork_daemon_followed():
    directory = os.path.join(WORK, "out")
    os.mkdir(directory)
    argv = [program("procs"), "daemon", "-"]
    plain = untraced(argv)
    trace = os.path.join(directory, "procs.ctf")
    traced = record(trace, argv, ("--full", "--follow-fork"))
    same_behaviour(plain, traced, "procs daemon --follow-fork")
    # The grandchild outlives its parent: memtap, a subreaper, waits for it and writes its trace.
    daemon = {site: want for site, want in expectations(["procs.c"], "daemon").items()
              if site not in expectations(["procs.c"], "parent")}
    files = trace_files(directory)
    found = []
    for path in files:
        verify_trace(path)
        sites = facts(path, ["procs.c"])["sites"]
        if any(sites.get(site, {}).get("allocs") for site in daemon):
            found.append(path)
            got = {site: sites.get(site, {"allocs": 0, "collects": 0, "words": 0})
                   for site in daemon}
            for site, want in daemon.items():
                expect((got[site]["allocs"], got[site]["collects"], got[site]["words"]) ==
                       (want["allocs"], want["frees"], want["words"]),
                       f"{path}: {site}: {got[site]}, expected {want}")
            other = {k: g["allocs"] for k, g in sites.items() if k not in daemon and g["allocs"]}
            expect(not other, f"{path}: the grandchild's trace has other sites {other}")
    expect(len(found) == 1, f"expected one trace with the grandchild's blocks, got {found} of "
                            f"{files}\nrecord's stderr:\n{traced.stderr[-2000:]}")


def test_forked_child_trace_starts_at_its_fork():
    # A forked child's ring file keeps its parent's clock base; its trace used to start with its
    # parent's (duration, timeline and times counted the parent's life before the fork).
    directory = os.path.join(WORK, "late-fork")
    os.mkdir(directory)
    code = ("import os, time\n"
            "time.sleep(0.4)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    kept = [bytearray(1000) for _ in range(100)]\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    trace = os.path.join(directory, "py.ctf")
    record(trace, [sys.executable, "-c", code], ("--full", "--follow-fork"))
    infos = {}
    for path in trace_files(directory):
        verify_trace(path)
        p = run([A.memtap, "info", "--json", path])
        expect(p.returncode == 0, f"info {path}: {p.stderr}")
        infos[path] = json.loads(p.stdout)
    children = [path for path in infos if path != trace]
    expect(trace in infos and len(children) == 1, f"traces: {sorted(infos)}")
    parent, child = infos[trace], infos[children[0]]
    late = (child["start_time"] - parent["start_time"]) / 1e6
    expect(late >= 0.35, f"the child's trace starts {late:.3f} s after its parent's, not at its "
                         f"fork 0.4 s in")
    expect(child["duration_s"] < 0.35,
           f"the child lived a few ms, its trace lasts {child['duration_s']} s")


def test_program_deleted_or_replaced_while_traced_keeps_its_names():
    # Rebuilt or deleted while traced: the file on disk is gone or another build, and its frames
    # read module+offset with a note to install debug symbols. The running process still maps the
    # file it loaded; memtap reads it there and says so.
    for how in ("deleted", "replaced"):
        copy = os.path.join(WORK, "self_replace_" + how)
        shutil.copy(program("self_replace"), copy)
        args = [copy]
        if how == "replaced":
            other = os.path.join(WORK, "other_build")
            shutil.copy(program("slow_worker"), other)
            args.append(other)
        trace = os.path.join(WORK, how + ".ctf")
        traced = record(trace, args)
        expect(traced.returncode == 0 and traced.stdout == how + "\n",
               f"self_replace {how}: exit {traced.returncode}, stdout {traced.stdout!r}")
        verify_trace(trace)
        check_sites(facts(trace, ["self_replace.c"]), ["self_replace.c"], "all",
                    f"self_replace {how}")
        expect(f"{copy} was deleted or replaced while the program ran: its symbols were read "
               "from the running program" in traced.stderr,
               f"self_replace {how}: no note of it:\n{traced.stderr[-2000:]}")


def test_full_exec_wrapper_traces_the_execd_program():
    prog = program("alloc_patterns")
    plain = untraced([prog])
    script = os.path.join(WORK, "wrapper.sh")
    with open(script, "w") as fh:
        fh.write(f'#!/bin/sh\nexec "{prog}" "$@"\n')
    os.chmod(script, 0o755)
    for label, argv in (("sh -c 'exec prog'", ["sh", "-c", f"exec '{prog}'"]),
                        ("wrapper script", [script])):
        trace = os.path.join(WORK, f"wrapped{len(label)}.ctf")
        traced = record(trace, argv)
        same_behaviour(plain, traced, label)
        verify_trace(trace)
        check_sites(facts(trace, ["alloc_patterns.c"]), ["alloc_patterns.c"], "all", label)
        expect("warning" not in traced.stderr, f"{label}: a warning of a followed exec:\n"
               f"{traced.stderr[-2000:]}")
    # A program exec'd that ends before memtap looks again: what the process ran before the exec
    # was taken for the program it last ran, and the exec reported as one the tracer did not
    # enter, the names the wrong way round (8 to 10 runs in 10).
    true = shutil.which("true")
    for run_number in range(5):
        trace = os.path.join(WORK, "exec-true.ctf")
        traced = record(trace, ["sh", "-c", f"exec {true}"])
        expect(traced.returncode == 0 and "warning" not in traced.stderr,
               f"run {run_number}: sh -c 'exec true': exit {traced.returncode}\n"
               f"{traced.stderr[-2000:]}")


def test_exec_into_a_program_the_tracer_cannot_enter_is_said():
    """A traced process that execs a set-user-ID program, execs with LD_PRELOAD taken out of the
    environment, or becomes a user who cannot write memtap's private ring directory (a second
    user, the first one having it) and execs, goes on untraced: memtap says so, naming the program and why, instead of writing a
    trace of the shell before it as if it were the whole run. An exec the tracer follows says
    nothing."""
    if os.geteuid() != 0:
        skip("needs root to make a file set-user-ID for another user", even_under_ci=True)
    nobody = 65534
    suid_dir = os.path.join(WORK, "suid")
    os.makedirs(suid_dir, mode=0o755, exist_ok=True)
    os.chmod(WORK, 0o755)
    probe, sleeper = os.path.join(suid_dir, "id"), os.path.join(suid_dir, "sleep")
    for src, dst in ((shutil.which("id"), probe), (shutil.which("sleep"), sleeper)):
        shutil.copy(src, dst)
        os.chown(dst, nobody, -1)
        os.chmod(dst, 0o4755)
    if run([probe, "-u"]).stdout.strip() != str(nobody):
        skip(f"set-user-ID has no effect in {suid_dir} (a nosuid mount?)", even_under_ci=True)
    env_sleep = os.path.realpath(shutil.which("sleep"))
    python = os.path.realpath("/usr/bin/python3")
    reexec = ("import os, sys; os.execve(sys.executable, "
              "[sys.executable, '-c', 'import time; time.sleep(1)'], {})")
    cases = (
        ("set-user-ID", ["sh", "-c", f"exec '{sleeper}' 1"],
         f"exec'd {sleeper}, which the tracer cannot enter (set-user-ID"),
        ("env -i", ["sh", "-c", "exec env -i sleep 1"],
         f"exec'd {env_sleep} and the tracer did not start in it"),
        # The same program again, as a daemon re-executing itself with a clean environment: the
        # program's path alone does not tell the images apart.
        ("itself, env -i", [python, "-c", reexec],
         f"exec'd {python} again and the tracer did not start in it"),
        # A process leaving root makes its new user's subdirectory in memtap's ring directory
        # (credentials.c): followed, and so is a second user's. A user who cannot reach the
        # directory ($TMPDIR private to root) cannot: said.
        ("a user", ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", "--",
                    "sleep", "0.3"], None),
        ("two users", ["sh", "-c", f"setpriv --reuid={nobody - 1} --regid={nobody - 1} "
                       f"--clear-groups true; exec setpriv --reuid={nobody} "
                       f"--regid={nobody} --clear-groups -- sleep 0.3"], None),
        ("another user", ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                          "--", "sleep", "1"],
         f"exec'd {env_sleep} as user id {nobody}, who cannot write memtap's ring directory"),
        ("unreadable tracer", ["setpriv", f"--reuid={nobody}", f"--regid={nobody}",
                               "--clear-groups", "--", "sleep", "1"],
         f"exec'd {env_sleep} as user id {nobody}, who cannot read the tracer"),
        ("traceable", ["sh", "-c", "exec sleep 0.3"], None),
        ("itself, traceable", ["sh", "-c", "exec sh -c 'sleep 0.3'"], None),
    )
    private = os.path.join(WORK, "private")
    os.mkdir(private, 0o700)
    shim = shim_for_others()
    os.chmod(WORK, 0o755)  # (the set-user-ID copies above)
    hidden = os.path.join(private, os.path.basename(A.shim))  # in a directory only root enters
    shutil.copy(A.shim, hidden)
    for label, argv, said in cases:
        trace = os.path.join(WORK, f"exec-{label.replace(' ', '_').replace(',', '')}.ctf")
        env = base_env({"TMPDIR": private if label == "another user" else
                        os.path.join(WORK, "tmp"), **shim})
        if label == "unreadable tracer":
            env["MEMTAP_PRELOAD"] = hidden
        p = record(trace, argv, options=(), env=env)
        expect(p.returncode == 0, f"{label}: exit {p.returncode}\n{p.stderr}")
        verify_trace(trace)
        warnings = [line for line in p.stderr.splitlines() if "warning" in line]
        if said is None:
            expect(not warnings, f"{label}: a warning for an exec the tracer followed: {warnings}")
            continue
        expect(len(warnings) == 1 and said in warnings[0] and trace in warnings[0] and
               "the trace describes" in warnings[0],
               f"{label}: expected one warning with {said!r}, got:\n{p.stderr}")
        expect(SUMMARY_RE.search(p.stderr), f"{label}: no closing line:\n{p.stderr}")


def test_full_dlopen_dlclose_library_allocations():
    lib = program("libdl_alloc_lib.so")
    f, _ = full_program("dlopen_main", [lib], sources=["dlopen_main.c", "dl_alloc_lib.c"])
    funcs = {site.split(":")[0] + ":" + g["func"] for site, g in f["sites"].items()}
    for want in ("dl_alloc_lib.c:dl_alloc", "dl_alloc_lib.c:lib_init"):
        expect(any(fn.startswith(want) for fn in funcs),
               f"library sites resolve to {sorted(funcs)}, expected {want}")


def test_full_deep_bound_library_allocations_are_traced():
    # A library opened with RTLD_DEEPBIND binds malloc and free to libc's, past the shim: its
    # allocations went untraced and the program's frees of them were unknown (20 of 20 here). The
    # shim points its slots back at the global scope's definitions once dlopen returns, bound
    # (RTLD_NOW) or not yet (RTLD_LAZY); only its constructor's blocks, allocated inside dlopen,
    # stay untraced.
    lib = program("libdl_alloc_lib.so")
    for how in ("deep", "deep-lazy"):
        f, traced = full_program("dlopen_main", [lib, how], mode="deep",
                                 sources=["dlopen_main.c", "dl_alloc_lib.c"])
        m = [m for m in SUMMARY_RE.finditer(traced.stderr)][-1]
        expect(count(m.group(4)) == 2, f"dlopen_main {how}: {m.group(4)} unknown frees, not the "
               "constructor's 2")


def test_deep_bound_libraries_opened_by_threads_at_once():
    # Threads opening and closing deep-bound libraries while others do the same: rebinding one
    # must neither race another's (pages made read-only between an mprotect and a store) nor walk
    # objects another thread unloads. In process it crashed in 3 of 5 runs.
    libraries = []
    for i in range(6):
        copy = os.path.join(WORK, f"libdl_alloc_{i}.so")
        shutil.copy(program("libdl_alloc_lib_now.so"), copy)
        libraries.append(copy)
    argv = [program("dlopen_main"), "deep-threads", *libraries]
    plain = untraced(argv)
    expect(plain.returncode == 0 and plain.stdout == "threads done\n",
           f"untraced: exit {plain.returncode}\n{plain.stderr}")
    for run_number in range(3):
        trace = os.path.join(WORK, f"deep-threads-{run_number}.ctf")
        if not A.lib_sanitized:
            p = run(argv, env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace,
                                        "MEMTAP_FULL": "1"}))
            same_behaviour(plain, p, f"dlopen_main deep-threads in process, run {run_number}")
            verify_trace(trace)
        traced = record(trace, argv)
        same_behaviour(plain, traced, f"dlopen_main deep-threads, run {run_number}")
        verify_trace(trace)


def test_signal_interrupting_system_calls_stays_so():
    # siginterrupt(SIGALRM, 1) then signal(SIGALRM, handler): the alarm must interrupt a read of
    # an empty pipe (EINTR). glibc's siginterrupt went past the shim's signal(), which then set
    # SA_RESTART, and the read waited for ever under memtap record and in process.
    argv = [program("signal_malloc"), "interrupt"]
    plain = untraced(argv)
    expect("read -1 EINTR" in plain.stdout, f"untraced: {plain.stdout!r}")
    traced = record(os.path.join(WORK, "interrupt.ctf"), argv, options=(), timeout=30)
    same_behaviour(plain, traced, "signal_malloc interrupt")
    if not A.lib_sanitized:
        p = run(argv, env=base_env({"LD_PRELOAD": A.shim,
                                    "MEMTAP": os.path.join(WORK, "interrupt-inprocess.ctf")}),
                timeout=30)
        same_behaviour(plain, p, "signal_malloc interrupt (in process)")


def test_full_signal_handler_mallocs_raise():
    full_program("signal_malloc", ["raise"], mode="raise")


def test_full_signal_handler_mallocs_inside_malloc():
    f, traced = full_program("signal_malloc", ["async"], mode="async")
    m = re.search(r"async: (\d+) rounds, (\d+) handled", traced.stderr)
    expect(m, f"signal_malloc async printed no counts\n{traced.stderr[-2000:]}")
    rounds, handled = int(m.group(1)), int(m.group(2))
    lines = expectations(["signal_malloc.c"], "async")
    by_count = sorted(f["sites"][s]["allocs"] for s in lines if s in f["sites"])
    expect(by_count == sorted([1, rounds, handled]),
           f"per-site allocations {by_count}, expected warm-up 1, main loop {rounds}, "
           f"handler {handled}")


def test_signal_handler_on_a_small_alternate_stack_allocates():
    # A crash handler's alternate stack is often SIGSTKSZ (8 KiB here). libunwind needs more than a
    # handler that allocates there has left: it overflowed the stack, and the program died of
    # SIGSEGV where untraced it ran its handler. It walks on a stack of the thread's own then, and
    # the allocations keep their backtraces on an 8 KiB stack as on a 64 KiB one (until
    # 2026-11-30 they were recorded without one on the small stack).
    source_name = "altstack_malloc.c"
    for size, mode in (("8192", "small"), ("65536", "big")):
        argv = [program("altstack_malloc"), size, "10"]
        plain = untraced(argv)
        expect(plain.stdout == "handled 10\n" and plain.returncode == 0,
               f"untraced {argv}: exit {plain.returncode}, {plain.stdout!r}")
        for options in ((), ("--full",)):
            trace = os.path.join(WORK, f"altstack-{size}.ctf")
            traced = record(trace, argv, options)
            same_behaviour(plain, traced, f"{' '.join(argv)} {options}")
            verify_trace(trace)
            if not options:
                continue
            f = facts(trace, [source_name])
            check_summary_line(traced.stderr, trace, f)
            check_sites(f, [source_name], mode, f"altstack_malloc {size}")
            expect(f["allocs"] >= 100, f"altstack_malloc {size}: {f['allocs']} allocations in the "
                   "trace, fewer than the handler's 100")


def test_coroutines_on_small_stacks_allocate():
    # Coroutines (makecontext) on 4 KiB stacks above a guard page, allocating between switches:
    # the shim knows no bounds for such a stack, so libunwind walked there and overflowed it
    # (SIGSEGV; on heap stacks a corrupted heap, an abort in the program's next realloc) where
    # untraced 4 KiB sufficed. libunwind now walks on a stack of the thread's own, from the
    # coroutine's frames: every allocation is traced with its backtrace through the coroutine.
    argv = [program("coroutine_malloc"), "4096", "2"]
    plain = untraced(argv)
    expect(plain.stdout == "coroutines 2 rounds 200\n" and plain.returncode == 0,
           f"untraced {argv}: exit {plain.returncode}, {plain.stdout!r}")
    for options in ((), ("--full",)):
        trace = os.path.join(WORK, "coroutines.ctf")
        traced = record(trace, argv, options)
        same_behaviour(plain, traced, f"coroutine_malloc 4096 2 {options}")
        verify_trace(trace)
        if options:
            f = facts(trace, ["coroutine_malloc.c"])
            check_summary_line(traced.stderr, trace, f)
            check_sites(f, ["coroutine_malloc.c"], "all", "coroutine_malloc 4096 2")


def test_full_signal_handler_longjmps_out_of_the_tracer():
    # A handler that leaves the tracer's code by siglongjmp abandons what it was doing, a ring write
    # included: every allocation after the jumps is still recorded.
    f, traced = full_program("signal_malloc", ["longjmp"], mode="longjmp")
    m = re.search(r"longjmp: (\d+) jumps", traced.stderr)
    expect(m and int(m.group(1)) == 100,
           f"signal_malloc longjmp did not jump out of the tracer 100 times\n{traced.stderr[-2000:]}")
    # The jumps also leave records being built in the thread's scratch levels (a REALLOC's): the
    # levels must come back, or after four such jumps every later REALLOC is built on the stack
    # and cut to its 32 innermost frames (an outermost "<truncated>" frame). The reallocs 60
    # calls deep after the jumps keep their whole stack, main included.
    trace = os.path.join(WORK, "signal_malloc.ctf")
    site = next(site for site, want in expectations(["signal_malloc.c"], "longjmp").items()
                if want.get("words") == 750)
    dump = run([A.memtap, "dump", trace])
    expect(dump.returncode == 0, f"memtap dump {trace}: exit {dump.returncode}\n{dump.stderr}")
    deep = [line for line in dump.stdout.splitlines()
            if " alloc" in line and line.rstrip().split(" ")[-1].startswith("deep_reallocs@")
            and f"{site}:" in line.rstrip().split(" ")[-1]]
    whole = [line for line in deep if "<truncated>" not in line and " main@" in line]
    expect(len(deep) == 50 and len(whole) == 50,
           f"of the {len(deep)} reallocs 60 calls deep after the jumps, {len(deep) - len(whole)} "
           f"lost their outer frames:\n" + "\n".join(l[:300] + " ..." for l in deep[:2]))


def test_full_ctrl_c_reaches_program_and_trace_is_written():
    trace = os.path.join(WORK, "interrupted.ctf")
    p = subprocess.Popen(record_command(trace, [program("slow_worker"), "1000"]),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    wait_for_line(p, "round 3")
    os.killpg(p.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole group
    out, err = p.communicate(timeout=60)
    # memtap ends by SIGINT as the program did, not with exit 130: a shell loop running it stops
    # at Ctrl-C only for a child killed by SIGINT.
    expect(p.returncode == -signal.SIGINT,
           f"memtap record ended with {p.returncode} after Ctrl-C, expected killed by SIGINT "
           f"(-2)\n{err[-2000:]}")
    expect("killed by" not in err, f"Ctrl-C, which shells pass over in silence, was reported:\n"
                                   f"{err[-2000:]}")
    f = verify_trace(trace)
    expect(f["allocs"] >= 400, f"the trace holds {f['allocs']} allocations; 4 rounds made 400")


def session_output(p, what, timeout=60):
    """(stdout, stderr) of `p`, started in a session of its own, once it ends; past `timeout` s
    the whole session is killed and the test fails."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail(f"{what}: the program did not end")


def test_signals_sent_to_memtap_reach_the_program():
    # `kill` aimed at memtap alone: termination and the signals that ask a program something are
    # passed on, so the program gets them as if untraced, and memtap ends with it, trace whole.
    # Unhandled, SIGUSR1 killed memtap and left the program running without it; so did SIGPROF,
    # SIGPWR and the real-time signals, which the tracer cannot count and memtap passes on as
    # they come.
    named = [(int(sig), sig.name) for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
                                              signal.SIGALRM, signal.SIGPROF, signal.SIGPWR,
                                              signal.SIGINT, signal.SIGQUIT)]
    for sig, name in named + [(int(signal.SIGRTMIN) + 1, "SIGRTMIN+1")]:
        trace = os.path.join(WORK, f"signalled-{name}.ctf")
        p = subprocess.Popen(record_command(trace, [program("slow_worker"), "1000"]),
                             env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        wait_for_line(p, "round 3")
        os.kill(p.pid, sig)
        out, err = session_output(p, f"{name} to memtap record")
        expect(p.returncode == -sig,
               f"{name} to memtap record: ended with {p.returncode}, expected killed by it "
               f"({-sig}), as the program was\n{err[-2000:]}")
        f = verify_trace(trace)
        expect(f["allocs"] >= 400, f"{name}: the trace holds {f['allocs']} allocations; "
                                   f"4 rounds made 400")


def test_signals_reach_the_program_once():
    """A signal sent to the process group (a supervisor's `kill -TERM -PGID`, a terminal's hangup)
    reaches the program itself, and memtap must not pass its own copy on: a second SIGTERM turned
    graceful's orderly shutdown (exit 0) into a forced one (exit 99), and a SIGHUP was counted
    twice. One sent to memtap alone is passed on, once. So is one memtap was started ignoring, as
    a script's background job starts with SIGINT and SIGQUIT ignored, to a program that sets its
    own handler (graceful does for both, the JVM for SIGQUIT): memtap kept ignoring them, and the
    program, which untraced gets them, never did."""

    def ignore_interrupts():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    for options in (("--full",), ()):
        for target in ("group", "memtap", "group, started ignoring", "memtap, started ignoring"):
            label = f"{target}, {' '.join(options) or 'sampled'}"
            trace = os.path.join(WORK, f"graceful-{target.replace(', ', '-').replace(' ', '-')}-"
                                 f"{len(options)}.ctf")
            p = subprocess.Popen(record_command(trace, [program("graceful")], options),
                                 env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True,
                                 preexec_fn=ignore_interrupts if "ignoring" in target else None)
            wait_for_line(p, "ready")
            for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGINT, signal.SIGQUIT,
                        signal.SIGTERM):
                if target.startswith("group"):
                    os.killpg(p.pid, sig)
                else:
                    os.kill(p.pid, sig)
                time.sleep(0.2)
            out, err = session_output(p, label)
            expect(p.returncode == 0 and "hup=1 usr1=1 int=1 term=1 quit=1" in out,
                   f"{label}: exit {p.returncode} (99: a second SIGTERM), output {out!r}, "
                   f"expected each signal once\n{err[-2000:]}")
            verify_trace(trace)


def test_terminal_signals_reach_the_program_once():
    """What a terminal sends its whole foreground process group, memtap and the program alike:
    SIGINT and SIGQUIT for Ctrl-C and Ctrl-\\, and SIGHUP when the session's leader (the shell)
    dies. memtap tells the program got its own copy from the tracer's count of its deliveries; a
    program the tracer is not in (here exec'd without LD_PRELOAD) counts nothing, and memtap
    passed its copy on 30 ms later: such a program got each of them twice (a second SIGINT or
    SIGTERM forces out a program whose first one shuts it down gracefully). A signal from the
    terminal (si_code SI_KERNEL) is now known to have reached the program while it shares
    memtap's process group. Run on a pseudo-terminal of its own."""
    import termios

    graceful = program("graceful")
    cases = (("traced, --full", [graceful], ("--full",)),
             ("traced, sampled", [graceful], ()),
             ("exec'd untraced", ["env", "-u", "LD_PRELOAD", graceful], ("--full",)))

    def on_terminal(command, stdout):
        """Starts `command` as the leader of a new session whose controlling terminal is a new
        pseudo-terminal; returns the process and the terminal's master side."""
        master, slave = os.openpty()

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        p = subprocess.Popen(command, env=base_env(), stdin=slave, stdout=stdout,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=controlling_terminal)
        os.close(slave)
        return p, master

    for label, argv, options in cases:
        # Keys typed at the terminal, memtap leading the session; then SIGTERM to memtap alone.
        trace = os.path.join(WORK, f"terminal-{len(argv)}-{len(options)}.ctf")
        p, master = on_terminal(record_command(trace, argv, options), subprocess.PIPE)
        try:
            wait_for_line(p, "ready")
            for key in (b"\x03", b"\x1c"):  # the terminal's INTR and QUIT characters
                os.write(master, key)
                time.sleep(0.2)
            # Then a SIGINT to the whole group, within a second: the terminal's delivery, which
            # the count showed, was once also taken as owed, and this one's delivery paid for it,
            # so memtap passed its copy on too (int=3). (A program the tracer is not in counts
            # nothing: a group's signal reaches it twice, docs/record.md §8.)
            traced = label.startswith("traced")
            if traced:
                os.killpg(p.pid, signal.SIGINT)
                time.sleep(0.2)
            os.kill(p.pid, signal.SIGTERM)
            out, err = session_output(p, label)
        finally:
            os.close(master)
        expect(p.returncode == 0 and f"hup=0 usr1=0 int={2 if traced else 1} term=1 quit=1" in out,
               f"{label}, Ctrl-C, Ctrl-\\, a group's SIGINT: exit {p.returncode}, output {out!r}, "
               f"expected two SIGINTs, one SIGQUIT and one SIGTERM\n{err[-2000:]}")
        verify_trace(trace)

        # A shell leads the session and dies: the kernel sends SIGHUP to the foreground group.
        trace = os.path.join(WORK, f"hangup-{len(argv)}-{len(options)}.ctf")
        output = os.path.join(WORK, "hangup.out")
        if os.path.exists(output):
            os.remove(output)
        command = " ".join(shlex.quote(word) for word in record_command(trace, argv, options))
        shell, master = on_terminal(["sh", "-c", f"{command} > {output}; echo ended"],
                                    subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "ready" not in read_text(output):
                time.sleep(0.05)
            expect("ready" in read_text(output), f"{label}, hangup: the program never started")
            memtap = children_of(shell.pid)
            expect(len(memtap) == 1, f"{label}, hangup: the shell's children are {memtap}")
            os.kill(shell.pid, signal.SIGKILL)
            shell.wait()
            time.sleep(0.3)
            os.kill(memtap[0], signal.SIGTERM)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "term=" not in read_text(output):
                time.sleep(0.05)
        finally:
            os.close(master)
        out = read_text(output)
        expect("hup=1 usr1=0 int=0 term=1 quit=0" in out,
               f"{label}, hangup: output {out!r}, expected one SIGHUP and one SIGTERM")
        verify_trace(trace)


class Terminal:
    """An interactive bash on a pseudo-terminal of its own (job control on), for what a user
    types: `type` a line, press a `key`, wait for text to `expect` in what the terminal shows."""

    def __init__(self):
        import termios
        self.master, slave = os.openpty()

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        env = base_env({"PS1": "PROMPT$ ", "TERM": "dumb", "PROMPT_COMMAND": ""})
        self.bash = subprocess.Popen(["bash", "--norc", "--noprofile", "-i"], stdin=slave,
                                     stdout=slave, stderr=slave, env=env,
                                     preexec_fn=controlling_terminal)
        os.close(slave)
        self.shown = ""
        self.expect("PROMPT$ ")

    def read(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    return
                self.shown += chunk.decode(errors="replace")

    def expect(self, text, timeout=30, since=0):
        deadline = time.monotonic() + timeout
        while text not in self.shown[since:] and time.monotonic() < deadline:
            self.read(0.1)
        expect(text in self.shown[since:],
               f"the terminal never showed {text!r}:\n{self.shown[since:][-2000:]}")

    def type(self, line):
        os.write(self.master, line.encode() + b"\n")

    def key(self, key):
        os.write(self.master, key)

    def close(self):
        """Ends the session: bash and whatever its jobs left running (a failed test's)."""
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                if entry.isdigit() and int(fields[3]) == self.bash.pid:  # its session
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                pass
        self.bash.wait()
        os.close(self.master)


def test_ctrl_z_stops_the_job_when_the_program_stops():
    """Ctrl-Z at a shell with job control: the terminal sends SIGTSTP to the job's whole group,
    memtap and the program. memtap stopped by it whatever the program did: a program that ignores
    SIGTSTP ran on while the shell showed its job stopped, took the terminal back and fed the
    program's input to the shell. memtap now stops when the program does (with the signal that
    stopped it), and goes on when the job is continued; its own writes to a terminal it does not
    hold never stop it (`stty tostop`: a background job stayed stopped at memtap's closing
    line)."""
    graceful = program("graceful")
    term = Terminal()
    try:
        for label, argv in (("stops", [graceful]),
                            ("ignores Ctrl-Z",
                             ["sh", "-c", f"trap '' TSTP; exec {shlex.quote(graceful)}"])):
            trace = os.path.join(WORK, f"ctrl-z-{len(argv)}.ctf")
            start = len(term.shown)
            command = " ".join(shlex.quote(w) for w in record_command(trace, argv, ()))
            term.type(f"{command}; echo rc=$?")
            term.expect("ready", since=start)
            term.key(b"\x1a")
            term.read(0.6)
            stopped = "Stopped" in term.shown[start:]
            expect(stopped == (label == "stops"),
                   f"{label}: Ctrl-Z {'did not stop' if not stopped else 'stopped'} the job:\n"
                   f"{term.shown[start:][-2000:]}")
            if stopped:
                term.expect("PROMPT$ ", since=start)
                term.type("fg; echo rc=$?")  # the job's status, once it ends
                term.read(0.5)
            memtap = [pid for pid in children_of(term.bash.pid)]
            expect(len(memtap) == 1, f"{label}: bash's children are {memtap}")
            os.kill(memtap[0], signal.SIGTERM)  # passed on to the program, which then ends
            term.expect("rc=0", since=start)
            expect("hup=0 usr1=0 int=0 term=1 quit=0" in term.shown[start:],
                   f"{label}: the program's counts:\n{term.shown[start:][-2000:]}")
            verify_trace(trace)
        # A background job under `stty tostop` ends, memtap's closing line written.
        start = len(term.shown)
        trace = os.path.join(WORK, "tostop.ctf")
        command = " ".join(shlex.quote(w) for w in record_command(trace, ["true"], ()))
        term.type(f"stty tostop; {command} & sleep 1; jobs; stty -tostop")
        term.expect("PROMPT$ ", since=start + 1)
        term.read(1.5)
        expect("Done" in term.shown[start:] and "Stopped" not in term.shown[start:],
               f"a background memtap record under stty tostop:\n{term.shown[start:][-2000:]}")
        verify_trace(trace)
    finally:
        term.close()


def process_state(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_program_stopped_alone_leaves_memtap_running():
    """`kill -TSTP` of the program alone stops the program, not its job: memtap, which follows
    the job's stops (Ctrl-Z), must keep running, or a later `kill -CONT` of the program alone
    would leave it writing into a full lossless ring behind a stopped memtap, for good."""
    trace = os.path.join(WORK, "stopped-alone.ctf")
    p = subprocess.Popen(record_command(trace, [program("graceful")]),
                         env=base_env({"MEMTAP_RING_SIZE": "8K"}), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=os.setpgrp)  # not orphaned: SIGTSTP stops it
    try:
        wait_for_line(p, "ready")
        prog = children_of(p.pid)
        expect(len(prog) == 1, f"memtap record's children: {prog}")
        os.kill(prog[0], signal.SIGTSTP)
        time.sleep(0.3)
        expect(process_state(prog[0]) == "T" and process_state(p.pid) != "T",
               f"after kill -TSTP of the program: program {process_state(prog[0])}, memtap "
               f"{process_state(p.pid)} (expected the program stopped, memtap running)")
        os.kill(prog[0], signal.SIGCONT)
        time.sleep(0.5)
        os.kill(prog[0], signal.SIGTERM)
        out, err = session_output(p, "graceful stopped and continued alone", timeout=20)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    expect(p.returncode == 0 and "term=1" in out,
           f"graceful stopped and continued alone: exit {p.returncode}, output {out!r}\n"
           f"{err[-2000:]}")
    verify_trace(trace)


def read_text(path):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def children_of(pid):
    """The pids of the processes whose parent is `pid` (from /proc/PID/stat)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


TAP_LINE = re.compile(r"^ +\d+\.\d s  ([\d,]+) allocations? \([^)]*\), ([\d,]+) frees?; "
                      r"since tap started ([\d,]+) ", re.M)
TAP_CLOSING = re.compile(r"^memtap tap: process (\d+), [\d.]+ s: ([\d,]+) allocations? "
                         r"\([^)]*\), ([\d,]+) frees?", re.M)


def tap(pid, *options, timeout=60):
    return run([A.memtap, "tap", *options, str(pid)], env=base_env(), timeout=timeout)


def test_tap_watches_a_recorded_process_without_disturbing_its_trace():
    """`memtap tap PID` reads the rings of a process memtap record traces, beside the recorder:
    a line of counts per interval, the window's top sites at the end, the window as a trace of its
    own; the recorder's trace still has every allocation (tap takes nothing from it)."""
    rounds = 60  # 100 blocks a round, 50 ms apart: 3 s
    trace = os.path.join(WORK, "tapped.ctf")
    worker_copy = os.path.join(WORK, "slow_worker")  # a file -o may try to write over
    shutil.copy2(program("slow_worker"), worker_copy)
    p = subprocess.Popen(record_command(trace, [worker_copy, str(rounds)]),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        wait_for_line(p, "round 3")
        worker = children_of(p.pid)
        expect(len(worker) == 1, f"memtap record's children: {worker}")
        # -o naming the trace being written, or standard output: refused, nothing written.
        over = tap(worker[0], "-o", trace)
        expect(over.returncode == 1 and "tap does not write over it" in over.stderr,
               f"memtap tap -o <the recorder's trace>: exit {over.returncode}\n{over.stderr}")
        recorder = tap(p.pid)  # memtap record maps its program's ring file, as a reader
        expect(recorder.returncode == 1 and "tap the traced process itself" in recorder.stderr,
               f"memtap tap <memtap record's pid>: exit {recorder.returncode}\n{recorder.stderr}")
        to_stdout = tap(worker[0], "-o", "-")
        expect(to_stdout.returncode == 64 and "-o takes a file" in to_stdout.stderr,
               f"memtap tap -o -: exit {to_stdout.returncode}\n{to_stdout.stderr}")
        with open(f"/proc/{worker[0]}/maps") as fh:  # tap's input, the ring file itself
            ring = next(line.split()[5] for line in fh if line.rstrip().endswith(".memtap-ring"))
        onto_program = tap(worker[0], "-o", worker_copy)
        expect(onto_program.returncode == 1 and "is mapped by process" in onto_program.stderr,
               f"memtap tap -o <the program>: exit {onto_program.returncode}\n"
               f"{onto_program.stderr}")
        onto_ring = tap(worker[0], "-o", ring)
        expect(onto_ring.returncode == 1 and os.path.exists(ring),
               f"memtap tap -o <the ring file>: exit {onto_ring.returncode}\n{onto_ring.stderr}")
        window = os.path.join(WORK, "window.ctf")
        t = tap(worker[0], "--duration", "1500ms", "--interval", "500ms", "-n", "3", "-o", window)
        out, err = session_output(p, "slow_worker under memtap record")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    expect(t.returncode == 0, f"memtap tap: exit {t.returncode}\n{t.stderr}")
    lines = TAP_LINE.findall(t.stdout)
    expect(len(lines) >= 2, f"memtap tap printed {len(lines)} interval lines:\n{t.stdout}")
    closing = TAP_CLOSING.search(t.stdout)
    expect(closing and int(closing.group(1)) == worker[0],
           f"memtap tap: no closing line naming process {worker[0]}:\n{t.stdout}")
    allocations = count(closing.group(2))
    expect(allocations >= 1000 and allocations == count(lines[-1][2]),
           f"memtap tap: {allocations} allocations in the window (the interval lines add up to "
           f"{lines[-1][2]}), expected 1,000 or more in 1.5 s of 2,000 a second:\n{t.stdout}")
    site = next(iter(expectations(["slow_worker.c"], "all")))  # "slow_worker.c:LINE"
    expect(re.search(r"^  1\. .* main \S*" + re.escape(site) + r"$", t.stdout, re.M),
           f"memtap tap's top does not lead with slow_worker.c's malloc ({site}):\n{t.stdout}")
    w = verify_trace(window)
    expect(w["allocs"] == allocations, f"the window holds {w['allocs']} allocations, the closing "
                                       f"line said {allocations}")
    # The recorder's own trace is whole: every round's 100 blocks and stdout's buffer.
    f = verify_trace(trace)
    expect(f["allocs"] == 100 * rounds + 1,
           f"memtap record's trace holds {f['allocs']} allocations with tap beside it, "
           f"expected {100 * rounds + 1}")


def test_tap_follows_a_process_tracing_itself_to_its_end():
    """A process tracing itself (MEMTAP=) deletes its ring file: tap opens it through
    /proc/PID/map_files (root only), and without --duration ends when the process does."""
    if os.geteuid() != 0:
        skip("/proc/PID/map_files opens only for root")
    if A.lib_sanitized:
        skip("libmemtap is sanitized: the shim cannot load it into a plain program",
             even_under_ci=True)
    trace = os.path.join(WORK, "self-tapped.ctf")
    env = base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_FULL": "1"})
    p = subprocess.Popen([program("slow_worker"), "40"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_line(p, "round 3")
        t = tap(p.pid, "--interval", "0s", "-n", "1")
        out, err = session_output(p, "slow_worker tracing itself")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    expect(t.returncode == 0, f"memtap tap: exit {t.returncode}\n{t.stderr}")
    expect(not TAP_LINE.search(t.stdout), f"--interval 0s printed interval lines:\n{t.stdout}")
    closing = TAP_CLOSING.search(t.stdout)
    expect(closing and count(closing.group(2)) >= 3000,
           f"memtap tap did not read the process to its end (40 rounds of 100):\n{t.stdout}")
    f = verify_trace(trace)
    expect(f["allocs"] == 4001, f"the process's own trace holds {f['allocs']} allocations with "
                                f"tap beside it, expected 4,001")


def test_tap_refuses_what_it_cannot_watch():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        t = tap(sleeper.pid)
        expect(t.returncode == 1 and f"process {sleeper.pid} is not traced by memtap" in t.stderr,
               f"memtap tap of an untraced process: exit {t.returncode}\n{t.stderr}")
    finally:
        sleeper.kill()
        sleeper.wait()
    t = tap(sleeper.pid)  # reaped: no such process now
    expect(t.returncode == 1 and f"no process {sleeper.pid}" in t.stderr,
           f"memtap tap of a process that ended: exit {t.returncode}\n{t.stderr}")
    for args, message in ((["abc"], "'abc' is not a process id"),
                          ([], "which process?"),
                          (["1", "2"], "one process at a time"),
                          (["--duration", "5", "1"], "--duration takes a duration"),
                          (["--interval", "x", "1"], "--interval takes a duration"),
                          (["-n", "-1", "1"], "-n takes a count")):
        t = run([A.memtap, "tap", *args], env=base_env())
        expect(t.returncode == 64 and message in t.stderr,
               f"memtap tap {' '.join(args)}: exit {t.returncode}\n{t.stderr}")


def test_leaks_names_file_and_line():
    full_program("leaky")
    trace = os.path.join(WORK, "leaky.ctf")
    line = next(int(s.split(":")[1]) for s, w in expectations(["leaky.c"], "all").items()
                if w.get("frees") == 0)
    p = run([A.memtap, "leaks", "--json", "-n", "0", trace])
    expect(p.returncode == 0, f"memtap leaks exited {p.returncode}\n{p.stderr}")
    groups = json.loads(p.stdout)["groups"]
    ours = [g for g in groups if g["key"]["file"].endswith("leaky.c")]
    expect(len(ours) == 1, f"expected one leak group in leaky.c, got {[g['key'] for g in ours]}")
    g = ours[0]
    expect(g["key"]["line"] == line and g["key"]["function"].startswith("remember"),
           f"leak named {g['key']}, expected remember at leaky.c:{line}")
    expect(g["leaked"]["objects"] == 7 and g["leaked"]["bytes"] == 7 * 200,
           f"leak amount {g['leaked']}, expected 7 objects, 1400 bytes")
    text = run([A.memtap, "leaks", trace]).stdout
    expect(f"leaky.c:{line}" in text, f"`memtap leaks` text does not name leaky.c:{line}")
    expect("no symbols" not in text, f"a program with symbols was said to have none:\n{text}")


# --- independent recount ---------------------------------------------------------------------


def mtrace_counts(log, skip_loader):
    """Allocations and frees in a glibc MALLOC_TRACE log after the marker block (see the module
    comment for what each line means); with skip_loader, not the dynamic loader's blocks."""
    allocs = frees = 0
    skipped = set()
    seen_marker = False
    marker_addr = None
    with open(log, errors="replace") as fh:
        for text in fh:
            words = text.split()
            op = next((i for i, w in enumerate(words) if w in ("+", "-", "<", ">", "!")), None)
            if op is None:
                continue
            kind, rest = words[op], words[op + 1:]
            if not seen_marker:
                if kind == "+" and len(rest) >= 2 and int(rest[1], 16) == MARKER_BYTES:
                    seen_marker, marker_addr = True, rest[0]
                continue
            if kind == "-" and rest and rest[0] == marker_addr:
                marker_addr = None
                continue
            if kind in ("+", ">") and rest and rest[0] in ("(nil)", "0x0"):
                continue  # a failed allocation
            if kind in ("+", ">") and skip_loader and "/ld-linux" in (words[1] if op > 1 else ""):
                skipped.add(rest[0])
            elif kind in ("+", ">"):
                skipped.discard(rest[0])
                allocs += 1
            elif kind in ("-", "<") and rest and rest[0] in skipped:
                skipped.discard(rest[0])
            elif kind in ("-", "<"):
                frees += 1
    expect(seen_marker, f"{log}: no marker allocation: mtrace did not start")
    return allocs, frees


def recount(label, argv, env_extra=None, cwd=None, stdin_file=None, compare_stdout=True,
            skip_loader=False):
    if not os.path.exists(MALLOC_DEBUG):
        skip(f"{MALLOC_DEBUG} not found (Debian package libc6)")
    marker = program("librecount_marker.so")
    log = os.path.join(WORK, label + ".mtrace")
    env = base_env(env_extra)

    def stdin():
        return open(stdin_file) if stdin_file else subprocess.DEVNULL

    plain = run(argv, env=env, cwd=cwd, stdin=stdin())
    glibc_env = dict(env, **record_variables(), LD_PRELOAD=f"{MALLOC_DEBUG} {marker}",
                     MALLOC_TRACE=log)
    logged = run(argv, env=glibc_env, cwd=cwd, stdin=stdin())
    same_behaviour(plain, logged, label + " under glibc's malloc trace", compare_stdout)
    glibc_allocs, glibc_frees = mtrace_counts(log, skip_loader)
    trace = os.path.join(WORK, label + ".ctf")
    traced = run(record_command(trace, argv), env=dict(env, LD_PRELOAD=marker, MALLOC_TRACE=log),
                 cwd=cwd, stdin=stdin())
    expect(os.path.exists(trace), f"{label}: no trace\n{traced.stderr[-2000:]}")
    same_behaviour(plain, traced, label + " under memtap record", compare_stdout)
    verify_trace(trace)
    f = facts(trace, marker=True, skip_file="rtld-malloc.h" if skip_loader else None)
    m = f["after_marker"]
    expect(m["seen"], f"{label}: the trace has no marker allocation of {MARKER_BYTES} bytes")
    unknown = unknown_frees(traced.stderr)
    print(f"{label}: glibc log {glibc_allocs} allocations, {glibc_frees} frees; memtap "
          f"{m['allocs']} allocations, {m['collects']} collects, {unknown} unknown frees")
    expect(m["allocs"] == glibc_allocs,
           f"{label}: allocations after the marker: glibc's log {glibc_allocs}, memtap "
           f"{m['allocs']}")
    expect(m["collects"] == glibc_frees,
           f"{label}: frees after the marker: glibc's log {glibc_frees}, memtap {m['collects']} "
           f"collects ({unknown} unknown frees)")
    return f


def record_variables():
    """The variables memtap record adds to the program's environment (with their values)."""
    trace = os.path.join(WORK, "env.ctf")
    p = run(record_command(trace, ["/usr/bin/env"]), env=base_env())
    mine = base_env()
    added = {}
    for line in p.stdout.splitlines():
        name, eq, value = line.partition("=")
        if eq and name not in mine and name != "LD_PRELOAD":
            added[name] = value
    return added


def unknown_frees(stderr):
    m = re.search(r"(\d[\d,]*)\s+unknown frees?", stderr)
    return count(m.group(1)) if m else 0


def test_recount_project_programs_match_glibc_mtrace():
    # procs is left out: a forked child inherits glibc's log stream and writes into it too.
    # dlopen_main: ld.so's own blocks are left out of both counts (trace_facts --skip-file): how
    # many it allocates for its object tables depends on how many objects are loaded, and the
    # tracer loads its own.
    problems = []
    for entry in (("alloc_patterns", [program("alloc_patterns")]),
                  ("cxx_new", [program("cxx_new")]),
                  ("lifecycle", [program("lifecycle")]),
                  ("leaky", [program("leaky")]),
                  ("threads_cross", [program("threads"), "cross"]),
                  ("threads_many", [program("threads"), "many"]),
                  ("threads_short", [program("threads"), "short"]),
                  ("sampled_full", [program("sampled")]),
                  ("dlopen_main", [program("dlopen_main"), program("libdl_alloc_lib.so")], True),
                  ("signal_raise", [program("signal_malloc"), "raise"]),
                  ("jemalloc_probe_glibc", [program("jemalloc_probe")])):
        label, argv, skip_loader = (entry + (False,))[:3]
        try:
            recount(label, argv, skip_loader=skip_loader)
        except Failure as e:
            problems.append(str(e))
    if problems:
        fail("\n".join(problems))


def need(tool, package):
    path = shutil.which(tool)
    if not path:
        skip(f"{tool} not found (Debian package {package})")
    return path


def test_recount_sqlite3_matches_glibc_mtrace():
    sqlite3 = need("sqlite3", "sqlite3")
    script = os.path.join(WORK, "script.sql")
    with open(script, "w") as fh:
        fh.write("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);\n"
                 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)\n"
                 "INSERT INTO t(name, v) SELECT printf('name-%05d', x), x * 0.5 FROM c;\n"
                 "CREATE INDEX t_name ON t(name);\n"
                 "SELECT count(*), sum(v), min(name), max(name) FROM t;\n"
                 "SELECT name FROM t WHERE id % 400 = 0 ORDER BY name DESC;\n"
                 "UPDATE t SET name = upper(name) WHERE id < 100;\n"
                 "SELECT group_concat(name, ',') FROM (SELECT name FROM t WHERE id < 5);\n")
    recount("sqlite3", [sqlite3, "-batch", "-init", "/dev/null", ":memory:"], stdin_file=script)
    # Debian's sqlite3 is stripped: a frame without line tables reads "module+0x... /its/module"
    # (or "function /its/module"), never with a made-up line 0.
    text = run([A.memtap, "top", "-n", "3", os.path.join(WORK, "sqlite3.ctf")]).stdout
    stripped = [line.strip() for line in text.splitlines() if "libsqlite3.so" in line]
    expect(stripped, f"`memtap top` names no frame of libsqlite3:\n{text}")
    bad = [line for line in stripped if re.search(r":0$", line)]
    expect(not bad, f"frames without a line read as line 0: {bad[:3]}")
    # ... and the listing ends with what to install to get names.
    expect(re.search(r"^note: no symbols for \S*libsqlite3\.so\.0 .*-dbgsym", text, re.M),
           f"`memtap top` does not say how to get names for libsqlite3's frames:\n{text}")


def test_recount_python3_matches_glibc_mtrace():
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else need("python3",
                                                                                "python3")
    code = ("import json\n"
            "d = {str(i): [i] * (i % 7) for i in range(3000)}\n"
            "s = json.dumps(d, sort_keys=True)\n"
            "print(len(s), sum(len(v) for v in json.loads(s).values()))\n")
    recount("python3", [python, "-S", "-c", code],
            {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"})


def test_recount_git_log_matches_glibc_mtrace():
    git = need("git", "git")
    repo = os.path.join(WORK, "repo")
    os.mkdir(repo)
    env = base_env({"GIT_AUTHOR_NAME": "A U Thor", "GIT_AUTHOR_EMAIL": "author@example.com",
                    "GIT_COMMITTER_NAME": "C O Mitter", "GIT_COMMITTER_EMAIL": "c@example.com",
                    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
                    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z", "HOME": WORK,
                    "GIT_CONFIG_NOSYSTEM": "1"})
    run([git, "init", "-q", "-b", "main", repo], env=env)
    for i in range(20):
        with open(os.path.join(repo, f"file{i % 4}.txt"), "a") as fh:
            fh.write(f"line {i}\n")
        run([git, "-C", repo, "add", "."], env=env)
        p = run([git, "-C", repo, "commit", "-q", "-m", f"commit {i}"], env=env)
        expect(p.returncode == 0, f"git commit failed: {p.stderr}")
    extra = {k: env[k] for k in env if k.startswith("GIT_") or k == "HOME"}
    recount("git", [git, "-C", repo, "log", "--stat", "--format=%H %an %s"], extra)


# --- sampling ---------------------------------------------------------------------------------


def test_sampled_estimates_unbiased_over_seeds():
    interval = 4096  # bytes: lambda = 8 / 4096 samples per word
    rate = 8 / interval
    seeds = list(range(1, 33))
    sites = expectations(["sampled.c"], "all")
    counts = {site: [] for site in sites}
    argv = [program("sampled")]
    for seed in seeds:
        trace = os.path.join(WORK, f"sampled{seed}.ctf")
        # The same rate said both ways: --sample-interval in bytes, --rate in samples per word.
        options = ("--sample-interval", str(interval)) if seed % 2 else ("--rate", repr(rate))
        p = record(trace, argv, options, env=base_env({"MEMTAP_SEED": str(seed)}))
        expect(p.returncode == 0, f"seed {seed}: exit {p.returncode}\n{p.stderr[-2000:]}")
        f = verify_trace(trace)
        expect(abs(f["sample_rate"] - rate) < 1e-12, f"sample rate {f['sample_rate']} != {rate}")
        f = facts(trace, ["sampled.c"])
        expect(not f["error_count"], f"seed {seed}: {f['errors']}")
        for site in sites:
            g = f["sites"].get(site, {"nsamples": 0, "allocs": 0, "collects": 0})
            counts[site].append(g["nsamples"])
            # sampled.c frees every block: each sampled block's free is in the trace too.
            expect(g["allocs"] == g["collects"],
                   f"seed {seed}, {site}: {g['allocs']} sampled blocks, {g['collects']} frees")
        os.unlink(trace)
    n = len(seeds)
    problems = []
    for site, want in sorted(sites.items()):
        mu = want["bytes"] / 8 * rate  # expected samples: lambda per word
        xs = counts[site]
        mean = sum(xs) / n
        var = sum((x - mean) ** 2 for x in xs) / (n - 1)
        estimate = mean / rate * 8
        bound = 3 * math.sqrt(mu) / math.sqrt(n)
        print(f"{site}: true {want['bytes']} B, mean estimate {estimate:.0f} B "
              f"(samples mean {mean:.2f}, expected {mu:.2f}, 3 sigma/sqrt(N) {bound:.2f}), "
              f"dispersion var/mean {var / mu:.3f}")
        if abs(mean - mu) > bound:
            problems.append(f"{site}: mean samples {mean:.2f}, expected {mu:.2f} +- {bound:.2f}"
                            f" (estimate {estimate:.0f} B of {want['bytes']} B)")
        # (n-1) s^2 / mu is chi-square with n-1 degrees of freedom for Poisson counts; for 31
        # degrees, its 0.1% and 99.9% quantiles are about 12.1 and 61.2.
        q = (n - 1) * var / mu
        if not 12.1 <= q <= 61.2:
            problems.append(f"{site}: dispersion (n-1)s^2/mu = {q:.1f}, not Poisson-like "
                            f"(counts {xs})")
    if problems:
        fail("sampled estimates:\n  " + "\n  ".join(problems))


# --- backtraces -------------------------------------------------------------------------------


def backtraces(build, binary=None, env=None):
    """backtrace_sites built by `build` (or the copy at `binary`): every marked stack resolves to
    its functions, files and lines. Returns record's stderr."""
    name = f"backtrace_sites_{build}"
    argv = [binary or program(name)]
    plain = untraced(argv)
    trace = os.path.join(WORK, name + ".ctf")
    traced = record(trace, argv, env=env)
    same_behaviour(plain, traced, name)
    verify_trace(trace)
    f = facts(trace, ["backtrace_sites.c"], depth=3)
    check_sites(f, ["backtrace_sites.c"], "all", name)
    at = marked_lines("backtrace_sites.c")
    src = "backtrace_sites.c"

    def loc(func, mark):
        return f"{func}@{src}:{at[mark]}"

    wanted = [
        [loc("inlined_alloc", "inlined_malloc"), loc("main", "call_inlined")],
        [loc("make_block", "make_block_malloc"), loc("main", "first_adjacent")],
        [loc("make_block", "make_block_malloc"), loc("main", "second_adjacent")],
        [loc("make_block", "make_block_malloc"), loc("run_then_finish", "before_finish")],
        [loc("make_block", "make_block_malloc"), loc("finish", "finish_call"),
         loc("run_then_finish", "call_finish")],
    ]

    def normal(frame):  # gcc's clones: make_block.constprop.0 is make_block
        func, _, where = frame.partition("@")
        return func.split(".")[0] + "@" + where

    stacks = [[normal(x) for x in key.split(" < ")] for key in f["stacks"]]
    counts = {key: g["allocs"] for key, g in f["stacks"].items()}
    problems = []
    for want in wanted:
        hits = [k for k, s in zip(f["stacks"], stacks) if s[:len(want)] == want]
        n = sum(counts[k] for k in hits)
        if n != 1:
            problems.append(f"{' < '.join(want)}: {n} allocations, expected 1")
    if problems:
        ours = [k for k in f["stacks"] if src in k]
        fail(f"{name}: backtraces wrong:\n  " + "\n  ".join(problems) +
             "\nstacks seen in backtrace_sites.c:\n  " + "\n  ".join(ours))
    return traced.stderr


def test_backtraces_resolve_gcc():
    backtraces("gcc")


def test_backtraces_resolve_clang():
    backtraces("clang")


def split_debug_info(build, debug_dir):
    """A copy of backtrace_sites_`build` without DWARF, its DWARF in debug_dir/backtrace.debug,
    named by .gnu_debuglink (as `objcopy --only-keep-debug` + `--add-gnu-debuglink` leave them)."""
    for tool in ("objcopy", "strip"):
        if not shutil.which(tool):
            skip(f"{tool} not found (binutils)")
    bin_dir = os.path.join(WORK, "bin")
    os.makedirs(os.path.join(bin_dir, debug_dir), exist_ok=True)
    binary = os.path.join(bin_dir, "backtrace_sites")
    debug = os.path.join(bin_dir, debug_dir, "backtrace.debug")
    shutil.copy(program(f"backtrace_sites_{build}"), binary)
    for args in (["objcopy", "--only-keep-debug", binary, debug],
                 ["strip", "--strip-debug", binary],
                 ["objcopy", f"--add-gnu-debuglink={debug}", binary]):
        p = run(args)
        expect(p.returncode == 0, f"{' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    p = run(["readelf", "--section-headers", binary])
    expect(".debug_info" not in p.stdout and ".gnu_debuglink" in p.stdout,
           f"{binary}: strip left DWARF or objcopy added no .gnu_debuglink\n{p.stdout}")
    return binary, debug


def test_backtraces_resolve_from_separate_debug_info():
    """The DWARF is found through .gnu_debuglink in the .debug/ folder. A debug file of another
    build (its CRC differs) is not read, and when nothing on this machine has the DWARF the search
    stops there: neither memtap nor the program loads libdebuginfod (and with it libcurl and
    OpenSSL, whose exit handlers tore them down under in-process mode's consumer thread)."""
    binary, debug = split_debug_info("gcc", ".debug")
    backtraces("gcc", binary)
    shutil.copy(program("backtrace_sites_clang"), debug)
    trace = os.path.join(WORK, "wrong_debug.ctf")
    p = record(trace, [binary], env=base_env({"LD_DEBUG": "files"}))
    f = facts(trace, ["backtrace_sites.c"], depth=3)
    named = [k for k in f["stacks"] if "backtrace_sites.c:" in k]
    expect(not named, "a debug file whose CRC differs was read:\n  " + "\n  ".join(named[:5]))
    loaded = [line for line in p.stderr.splitlines() if "file=" in line and "debuginfod" in line]
    expect(not loaded, "libdebuginfod was loaded without --debuginfod:\n  " + "\n  ".join(loaded))
    # --debuginfod asks the servers (here one that refuses at once) and still writes the trace.
    env = base_env({"LD_DEBUG": "files", "DEBUGINFOD_URLS": "http://127.0.0.1:9",
                    "DEBUGINFOD_TIMEOUT": "5",
                    "DEBUGINFOD_CACHE_PATH": os.path.join(WORK, "debuginfod-cache")})
    p = record(trace, [binary], options=("--full", "--debuginfod"), env=env)
    expect(p.returncode == 0, f"record --debuginfod exited {p.returncode}\n{p.stderr[-2000:]}")
    expect(facts(trace)["read_ok"], "record --debuginfod wrote an unreadable trace")
    expect("file=libdebuginfod" in p.stderr, "record --debuginfod did not ask debuginfod")
    # A FIFO where the debug file would be (the folder is the traced program's to fill): memtap
    # skips it instead of waiting for ever in open(). (Not with --debuginfod, whose search is
    # libdwfl's own and opens it blocking.)
    os.remove(debug)
    os.mkfifo(debug)
    p = record(os.path.join(WORK, "fifo_debug.ctf"), [binary], timeout=60)
    expect(p.returncode == 0, f"record with a FIFO for the debug file exited {p.returncode}\n"
           f"{p.stderr[-2000:]}")


# --- ordering ---------------------------------------------------------------------------------


def test_ordering_producer_consumer_pinned():
    taskset = need("taskset", "util-linux")
    argv = [program("threads"), "queue"]
    plain = untraced(argv)
    for attempt in range(2):
        trace = os.path.join(WORK, f"queue{attempt}.ctf")
        # The consumer and the program share one CPU too: the most preemption there can be.
        # MEMTAP_TEST_PUBLISH_DELAY asks the shim to pause between stamping a record and
        # publishing it (the issue's test hook); the shim does not have it yet and ignores it.
        env = base_env({"MEMTAP_TEST_PUBLISH_DELAY": "1"})
        cpu = str(min(os.sched_getaffinity(0)))
        p = run([taskset, "-c", cpu] + record_command(trace, argv), env=env)
        same_behaviour(plain, p, "threads queue (pinned)")
        f = verify_trace(trace)  # no collect before its allocation, no id live twice
        check_sites(facts(trace, ["threads.c"]), ["threads.c"], "queue", "threads queue")
        unknown = unknown_frees(p.stderr)
        expect(not unknown, f"{unknown} frees were not matched to an allocation")
        expect(f["collects"] >= 20000, f"only {f['collects']} collects")


# --- jemalloc ---------------------------------------------------------------------------------


def test_jemalloc_kept_behind_shim():
    if not os.path.exists(JEMALLOC):
        skip(f"{JEMALLOC} not found (Debian package libjemalloc2)")
    env = base_env({"LD_PRELOAD": JEMALLOC})
    f, traced = full_program("jemalloc_probe", env=env)
    expect("jemalloc holds the blocks" in traced.stdout,
           f"under memtap record the blocks are not jemalloc's:\n{traced.stdout}")
    # Debian's jemalloc defines C++ operator new, which allocates without calling malloc: a C++
    # program's `new` goes untraced, which memtap says once; a C program calls no new.
    said = "C++ operator new is defined by " + JEMALLOC
    expect(said not in traced.stderr, f"a C program was warned about new:\n{traced.stderr}")
    trace = os.path.join(WORK, "jemalloc_cxx.ctf")
    p = record(trace, [program("cxx_new")], env=env)
    expect(p.stderr.count(said) == 1 and "memory allocated with new is not traced" in p.stderr,
           f"a C++ program under jemalloc: expected one warning about new, got:\n{p.stderr}")
    p = record(trace, [program("cxx_new")])
    expect("operator new" not in p.stderr, f"a warning about new under glibc:\n{p.stderr}")


# --- faults -----------------------------------------------------------------------------------


def wait_for_line(p, text, timeout=60):
    """Reads p's stdout (a pipe; raw reads, no buffering between select and read) until a line
    equal to `text`. Returns the lines read."""
    fd = p.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            fail(f"the program ended before printing {text!r}: {data[-300:]!r}\n"
                 f"{p.stderr.read()[-2000:]}")
        data += chunk
        lines = data.decode(errors="replace").split("\n")
        if text in lines[:-1]:
            return lines
    fail(f"no {text!r} within {timeout} s: {data[-300:]!r}")


def drain(p, until, timeout):
    """Keeps reading p's stdout (so that a writer never blocks on a full pipe) until until()."""
    fd = p.stdout.fileno()
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready and not os.read(fd, 65536):
            time.sleep(0.2)


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def test_own_malloc_is_said_and_what_it_passes_on_is_traced():
    """A program that defines malloc itself keeps it (the loader binds to it before the tracer):
    record says so on stderr, naming the program, and traces exactly the blocks its allocator
    passes on to the next malloc."""
    f, traced = full_program("own_malloc")
    expect(f"malloc is defined by {program('own_malloc')}" in traced.stderr,
           f"no warning naming the program's own malloc:\n{traced.stderr[-2000:]}")
    f, traced = full_program("alloc_patterns")
    expect("malloc is defined by" not in traced.stderr,
           f"warned about a program that uses libc's malloc:\n{traced.stderr[-2000:]}")


def test_nopie_program_taking_malloc_address_is_not_said_to_define_it():
    """A non-PIE program that takes malloc's address (Debian's python3) has an undefined malloc
    whose value is a PLT entry, which jumps to the tracer: every block is traced, and neither
    record nor the program's own stderr in process may say that the program defines malloc."""
    f, traced = full_program("nopie_malloc_address")
    expect("malloc is defined by" not in traced.stderr,
           f"warned about a PLT entry as if it defined malloc:\n{traced.stderr[-2000:]}")
    if A.lib_sanitized:
        return  # in-process mode cannot start with a sanitizer build of libmemtap.so
    trace = os.path.join(WORK, "nopie-inprocess.ctf")
    p = run([program("nopie_malloc_address")],
            env=base_env({"LD_PRELOAD": A.shim, "MEMTAP": trace, "MEMTAP_RATE": "1"}))
    expect(p.returncode == 0 and p.stdout == "done\n" and p.stderr == "",
           f"in process: exit {p.returncode}, stdout {p.stdout!r}, stderr:\n{p.stderr[-2000:]}")
    verify_trace(trace)
    check_sites(facts(trace, ["nopie_malloc_address.c"]), ["nopie_malloc_address.c"], "all",
                "nopie_malloc_address (in process)")


def test_fault_program_sigkilled_trace_complete():
    trace = os.path.join(WORK, "killed.ctf")
    p = subprocess.Popen(record_command(trace, [program("slow_worker"), "1000"]),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    wait_for_line(p, "round 3")
    kids = children_of(p.pid)
    expect(len(kids) == 1, f"memtap record has children {kids}, expected the program alone")
    os.kill(kids[0], signal.SIGKILL)
    out, err = p.communicate(timeout=60)
    expect(p.returncode == -signal.SIGKILL,
           f"memtap record ended with {p.returncode}, expected killed by SIGKILL as the program "
           f"was\n{err[-2000:]}")
    # memtap says it too, with what it means for the trace.
    expect("slow_worker: killed by SIGKILL (Killed): its trace ends there" in err,
           f"memtap record did not say the program was killed:\n{err[-2000:]}")
    f = verify_trace(trace)  # complete: memtap check exits 0, not 2
    expect(f["allocs"] >= 400, f"{f['allocs']} allocations in the trace; 4 rounds made 400")
    # A signal with no short name (a real-time one) is named by its number.
    rt = os.path.join(WORK, "killed_rt.ctf")
    p = run(record_command(rt, ["/usr/bin/python3", "-c", "import os, signal; "
                                "os.kill(os.getpid(), signal.SIGRTMIN + 3)"]), env=base_env())
    sig = signal.SIGRTMIN + 3
    expect(p.returncode == -sig and f"killed by signal {int(sig)} (" in p.stderr,
           f"a real-time signal: exit {p.returncode}\n{p.stderr[-2000:]}")


def test_fault_record_sigkilled_program_finishes():
    trace = os.path.join(WORK, "orphan.ctf")
    done = os.path.join(WORK, "finished")
    p = subprocess.Popen(record_command(trace, [program("slow_worker"), "200", done]),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    wait_for_line(p, "round 3")

    def flushed():  # the periodic flush has put the first rounds in the file
        if not os.path.exists(trace):
            return False
        try:  # before the first flush the file is empty: no facts at all
            return json.loads(run([A.facts, trace]).stdout).get("allocs", 0) >= 100
        except ValueError:
            return False

    # Killed once a flush has happened, however long the loaded machine takes to get there (the
    # program's 200 rounds of 50 ms pauses give it 10 s; a flush is due every second).
    drain(p, flushed, 120)
    expect(flushed(), "no periodic flush put the first rounds in the trace within 120 s")
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    drain(p, lambda: os.path.exists(done), 120)
    expect(os.path.exists(done), "the program did not finish after memtap record was killed")
    with open(done) as fh:
        expect(fh.read() == "finished\n", "the program's last write is wrong")
    f = verify_trace(trace, allow_truncated=True)
    expect(f["allocs"] >= 100, f"the killed recorder's trace holds {f['allocs']} allocations, "
                               "not even the first round's (no periodic flush?)")


def test_fault_record_sigkilled_before_a_process_starts_does_not_hold_it():
    """A process whose ring file appears after memtap record was killed (here the traced shell
    execs python once memtap is gone) fills its lossless ring with no consumer ever to come. It
    waited out the ring's attach timeout (10 s) before running on untraced; now it sees that the
    recorder named in MEMTAP_RING_CONSUMER is dead and stops tracing at once."""
    script = os.path.join(WORK, "late_allocator.py")
    with open(script, "w") as fh:
        fh.write("import time\nt = time.monotonic()\nfor i in range(300000):\n"
                 "    b = bytes(1000)\nprint(f'loop {time.monotonic() - t:.1f} s', flush=True)\n")
    trace = os.path.join(WORK, "killed_before_exec.ctf")
    p = subprocess.Popen(record_command(trace, ["sh", "-c", f"sleep 1; exec /usr/bin/python3 "
                                                            f"'{script}'"]),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 120
    out = ""
    while "loop" not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], 0.5)
        if ready:
            chunk = p.stdout.readline()
            if not chunk:
                break
            out += chunk
    m = re.search(r"loop ([\d.]+) s", out)
    expect(m, f"the program printed no loop time after memtap record was killed: {out!r}")
    # Untraced the loop takes a fraction of a second; waiting for the dead recorder took 10 s.
    expect(float(m.group(1)) < 8, f"the program's loop took {m.group(1)} s after memtap record "
                                  f"was killed: it waited for a recorder that was gone")


def ring_dirs():
    return set(glob.glob(os.path.join(WORK, "tmp", "memtap-record-*")))


def wait_for(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            fail(f"{what} within {timeout} s")
        time.sleep(0.05)


def gone(pid):
    """Whether process `pid` has exited (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def start_sleeping_record(name):
    """`memtap record -- sleep 300` in the background, once its ring file exists: the Popen, its
    ring directory and the traced program's pid."""
    before = ring_dirs()
    p = subprocess.Popen(record_command(os.path.join(WORK, name), ["sleep", "300"]),
                         env=base_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    new = []

    def ring_made():
        new[:] = [d for d in ring_dirs() - before if glob.glob(os.path.join(d, "*.memtap-ring"))]
        return new

    wait_for(ring_made, "no ring file appeared for memtap record -- sleep 300")
    kids = children_of(p.pid)
    expect(len(kids) == 1, f"memtap record has children {kids}, expected the program alone")
    return p, new[0], kids[0]


def test_fault_record_sigkilled_ring_directory_swept():
    """A memtap record killed by SIGKILL cannot remove its ring directory (with a sparse ring
    file of up to gigabytes); the next memtap record removes it once nothing uses it any more, and
    leaves alone the directory of a live recorder, of a killed recorder whose program still writes
    its ring, and any directory that is not exactly a recorder's."""
    killed, stale, orphan = start_sleeping_record("killed.ctf")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    expect(os.path.isdir(stale), f"the killed recorder's directory {stale} vanished by itself")
    live, live_dir, live_program = start_sleeping_record("live.ctf")
    # Decoys named as the killed (dead) recorder's directory is (mkdtemp's six characters aside),
    # each with something that makes it not ours to delete: a file that is not a ring file; a lock held (as a live recorder in another pid
    # namespace holds it, where its pid means nobody here); another owner. And the old name,
    # which says nobody's pid.
    tmp = os.path.join(WORK, "tmp")
    stem = re.sub(r"-[A-Za-z0-9]{6}$", "", os.path.basename(stale))
    decoys = {}
    for kind in ("stray0", "locked", "others", "oldnam"):
        decoys[kind] = os.path.join(tmp, f"{stem}-{kind}" if kind != "oldnam" else
                                    "memtap-record-oldnam")
        os.mkdir(decoys[kind], 0o700)
    with open(os.path.join(decoys["stray0"], "notes.txt"), "w") as fh:
        fh.write("not a ring file\n")
    lock = os.open(decoys["locked"], os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    if os.geteuid() == 0:
        os.chown(decoys["others"], 65534, 65534)
    else:
        os.rmdir(decoys["others"])
        del decoys["others"]

    def sweep():
        p = run(record_command(os.path.join(WORK, "sweeper.ctf"), ["true"]), env=base_env())
        expect(p.returncode == 0, f"memtap record -- true exited {p.returncode}\n{p.stderr}")

    try:
        sweep()
        expect(os.path.isdir(stale) and glob.glob(os.path.join(stale, "*.memtap-ring")),
               "the ring directory of a killed recorder was removed while its program still "
               "ran (and wrote its ring)")
        os.kill(orphan, signal.SIGKILL)
        wait_for(lambda: gone(orphan), f"the killed recorder's program {orphan} did not end")
        sweep()
        expect(not os.path.exists(stale),
               f"the killed recorder's ring directory is left behind: {stale} "
               f"{os.listdir(stale) if os.path.isdir(stale) else ''}")
        expect(glob.glob(os.path.join(live_dir, "*.memtap-ring")),
               f"the live recorder's ring file in {live_dir} was removed")
        for kind, path in decoys.items():
            expect(os.path.isdir(path), f"the {kind} decoy {path} was removed")
        expect(os.path.exists(os.path.join(decoys["stray0"], "notes.txt")),
               "a file that is not a ring file was removed")
    finally:
        os.close(lock)
        os.kill(live_program, signal.SIGTERM)
        live.wait(timeout=60)
    expect(live.returncode == -signal.SIGTERM,
           f"the live recorder ended with {live.returncode}, expected killed by SIGTERM as its "
           f"program was")
    expect(not os.path.exists(live_dir), f"the live recorder left {live_dir} at its end")
    verify_trace(os.path.join(WORK, "live.ctf"))


def test_fault_output_on_dev_full():
    if not os.path.exists("/dev/full"):
        skip("no /dev/full")
    argv = [program("slow_worker"), "3"]
    plain = untraced(argv)
    p = run(record_command("/dev/full", argv), env=base_env())
    expect(p.stdout == plain.stdout,
           f"the program's output changed with -o /dev/full:\n{p.stdout}\n{p.stderr[-2000:]}")
    expect(p.returncode != 0, "memtap record exited 0 though it could not write the trace")
    expect(re.search(r"/dev/full|[Nn]o space", p.stderr),
           f"memtap record does not say what failed:\n{p.stderr[-2000:]}")


def test_fault_full_ring_directory_says_set_tmpdir():
    """$TMPDIR on a file system with no room for the ring file's header: the program runs as
    untraced, and what to do about it is said (root, for a 256 KiB tmpfs)."""
    small = os.path.join(WORK, "small")
    os.mkdir(small)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs",
                                            small], capture_output=True).returncode != 0:
        skip("cannot mount a small tmpfs (not root, or no mount permission)", even_under_ci=True)
    try:
        argv = [program("slow_worker"), "2"]
        plain = untraced(argv)
        trace = os.path.join(WORK, "full_tmpdir.ctf")
        p = run(record_command(trace, argv), env=base_env({"TMPDIR": small}))
    finally:
        subprocess.run(["umount", small])
    expect(p.stdout == plain.stdout, f"the program's output changed:\n{p.stdout}\n{p.stderr}")
    expect("No space left on device (set TMPDIR to a directory whose file system has room)"
           in p.stderr, f"a full ring directory is not said with its way out:\n{p.stderr[-2000:]}")
    expect(p.returncode == 1 and not os.path.exists(trace),
           f"exit {p.returncode}, trace written: {os.path.exists(trace)}\n{p.stderr[-2000:]}")


def test_fault_static_program_refused():
    trace = os.path.join(WORK, "static.ctf")
    p = run(record_command(trace, [program("static_worker"), "1"]), env=base_env())
    expect(p.returncode != 0, f"memtap record of a static program exited 0\n{p.stderr}")
    expect(re.search(r"static", p.stderr, re.I),
           f"memtap record does not say the program is static:\n{p.stderr[-2000:]}")
    expect(not os.path.exists(trace), "a trace was written for a program that was not traced")


def test_fault_sanitizer_program_refused():
    trace = os.path.join(WORK, "asan.ctf")
    p = run(record_command(trace, [program("asan_worker"), "1"]), env=base_env())
    expect(p.returncode != 0, f"memtap record of an ASan program exited 0\n{p.stderr}")
    expect(re.search(r"sanitizer|asan", p.stderr, re.I),
           f"memtap record does not say the program is a sanitizer build:\n{p.stderr[-2000:]}")
    expect(not os.path.exists(trace), "a trace was written for a program that was not traced")


def test_fault_setuid_program_refused():
    # The loader ignores LD_PRELOAD in secure mode, i.e. when the effective uid differs from the
    # real one. As root a setuid-root program is not secure mode (euid 0 = uid 0), so the copy is
    # made setuid to another owner (nobody): then the shim could not enter it.
    if os.geteuid() != 0:
        skip("needs root: only root can make a setuid program owned by another user", True)
    directory = tempfile.mkdtemp(prefix="memtap-setuid-", dir=WORK)
    os.chmod(WORK, 0o755)
    os.chmod(directory, 0o755)
    copy = os.path.join(directory, "setuid_worker")
    shutil.copy(program("slow_worker"), copy)
    nobody = 65534
    os.chown(copy, nobody, nobody)
    os.chmod(copy, 0o4755)
    if not os.stat(copy).st_mode & 0o4000:
        skip("the file system dropped the setuid bit", True)
    trace = os.path.join(WORK, "setuid.ctf")
    p = run(record_command(trace, [copy, "1"]), env=base_env())
    expect(p.returncode != 0, f"memtap record of a setuid program exited 0\n{p.stderr}")
    expect(re.search(r"setuid|set-user-ID|secure", p.stderr, re.I),
           f"memtap record does not say the program is setuid:\n{p.stderr[-2000:]}")
    expect(not os.path.exists(trace), "a trace was written for a program that was not traced")
    # Set-user-ID to the user who runs it changes no id: no secure mode, and it is traced.
    own = os.path.join(directory, "setuid_own_worker")
    shutil.copy(program("slow_worker"), own)
    os.chmod(own, 0o4755)
    plain = untraced([own, "1"])
    trace = os.path.join(WORK, "setuid_own.ctf")
    traced = record(trace, [own, "1"])
    same_behaviour(plain, traced, "setuid_own_worker 1")
    expect(traced.returncode == 0, f"a set-user-ID program of its own user was refused:\n"
                                   f"{traced.stderr[-2000:]}")
    verify_trace(trace)


# ---------------------------------------------------------------------------------------------


def main():
    global A, WORK
    tests = {name[5:]: fn for name, fn in globals().items() if name.startswith("test_")}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memtap", required=True)
    parser.add_argument("--shim", required=True)
    parser.add_argument("--facts", required=True)
    parser.add_argument("--programs", required=True)
    parser.add_argument("--sources", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--stack-allowance", type=int, default=1024,
                        help="bytes of stack the tracer may need beyond the program's calls")
    parser.add_argument("--lib-sanitized", action="store_true",
                        help="libmemtap.so is a sanitizer build: in-process mode cannot start")
    parser.add_argument("test", choices=sorted(tests))
    A = parser.parse_args()
    WORK = tempfile.mkdtemp(prefix=f"memtap-{A.test}-")
    os.mkdir(os.path.join(WORK, "tmp"))
    try:
        tests[A.test]()
    except Failure as e:
        print(f"FAIL: {A.test}: {e}\n(scratch directory kept: {WORK})")
        return 1
    if not A.keep:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"PASS: {A.test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
