#!/usr/bin/env python3
# The tracer benchmark's runner (bench/tracer/README.md): runs each workload program untraced,
# under the pass-through floor shim, under `memtap record` (sampled, --full, --full --compress)
# and under Debian's heaptrack, alternated and pinned, and prints medians with spread, ratios to
# the untraced run of the same round, trace sizes, peak RSS and the tracer's own CPU, then the
# trace writer's events/s on each program's recorded stream. Python 3 standard library only.
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["untraced", "floor", "sampled", "sampled-base", "full", "full-base", "full-zst",
         "full-zst-ms", "heaptrack"]
BASE_MODES = {"sampled-base": "sampled", "full-base": "full"}  # --memtap-base's, and their pairs
STOP = []  # set by SIGUSR1: finish the current round, print what was measured, and stop


def request_stop(signum, frame):
    STOP.append(signum)


MEMTAP_MODES = {"sampled": [], "sampled-base": [], "full": ["--full"], "full-base": ["--full"],
                "full-zst": ["--full", "--compress"],
                "full-zst-ms": ["--full", "--compress", "--time-resolution", "1ms"]}


def programs(build):
    tracer = os.path.join(build, "bench", "tracer")

    def own(name, *args):
        return {"argv": [os.path.join(tracer, "bench_tracer_" + name), *args]}

    return {
        "churn": own("churn", "1", "1"),
        "churn2": own("churn", "1", "2"),
        "tree": own("tree", "1"),
        "strbuild": own("strbuild", "1"),
        "containers": own("containers", "1"),
        "sqlite3": {"argv": ["/usr/bin/sqlite3", ":memory:"],
                    "stdin": os.path.join(HERE, "sqlite_workload.sql")},
        "python3": {"argv": ["/usr/bin/python3", os.path.join(HERE, "python_workload.py")],
                    "env": {"PYTHONHASHSEED": "0"}},
    }


def scaled(spec, scale):
    """The program's argv with the SCALE argument multiplied (own programs and python3)."""
    argv = list(spec["argv"])
    if scale != 1.0:
        if os.path.basename(argv[0]).startswith("bench_tracer_"):
            argv[1] = "%g" % (float(argv[1]) * scale)
        elif argv[0].endswith("python3"):
            argv.append("%g" % scale)
    return argv


class Run:
    """One measured execution: wall, CPU of the whole tree, peak RSS and what the tracer left."""

    def __init__(self):
        self.ok = False
        self.wall = self.cpu = None
        self.rss_kb = None  # wait4's ru_maxrss: the largest process of the tree
        self.prog_rss_kb = self.prog_cpu = self.prog_minflt = None
        # the program's own voluntary and involuntary context switches; the tracer processes'
        self.prog_vcsw = self.prog_ivcsw = self.tracer_vcsw = None
        self.tracer_rss_kb = self.tracer_cpu = None
        self.trace_bytes = None
        # ms from spawning the command to the program's start (its libraries loaded), and from the
        # program's exit to the command's: what a tracer adds around the program in wall time
        self.start_ms = self.tail_ms = None
        self.stdout = b""
        self.stderr = b""


def prepend_preload(env, lib):
    old = env.get("LD_PRELOAD")
    env["LD_PRELOAD"] = lib + (":" + old if old else "")


def read_rusage_dir(path):
    entries = []
    for name in os.listdir(path):
        try:
            with open(os.path.join(path, name)) as f:
                exe, rss, utime, stime, *rest = f.read().rstrip("\n").split("\t")
            entries.append((exe, int(rss), float(utime) + float(stime),
                            int(rest[0]) if rest else None,
                            int(rest[1]) if len(rest) > 2 else None,
                            int(rest[2]) if len(rest) > 2 else None,
                            float(rest[3]) if len(rest) > 4 else None,  # CLOCK_MONOTONIC s
                            float(rest[4]) if len(rest) > 4 else None))
        except (OSError, ValueError):
            pass
    return entries


def run_once(args, spec, mode, work, scale=None):
    """Runs `spec` once in `mode`; the trace (if any) is left in `work`/trace*."""
    for name in os.listdir(work):
        p = os.path.join(work, name)
        if os.path.isdir(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    rudir = os.path.join(work, "rusage")
    os.mkdir(rudir)
    env = dict(os.environ)
    env.update(spec.get("env", {}))
    argv = scaled(spec, args.scale if scale is None else scale)
    if mode == "floor":
        prepend_preload(env, args.floor)
    elif mode in MEMTAP_MODES:
        out = os.path.join(work, "trace.ctf" + (".zst" if mode.startswith("full-zst") else ""))
        memtap = args.memtap_base if mode in BASE_MODES else args.memtap
        argv = [memtap, "record", "-o", out, *MEMTAP_MODES[mode], "--", *argv]
    elif mode == "heaptrack":
        argv = [args.heaptrack, "-o", os.path.join(work, "trace"), *argv]
    # Every process of the run (the tracer and all it starts) reports its own rusage at exit. The
    # library interposes nothing, so the untraced run stays untraced.
    prepend_preload(env, args.rusage_lib)
    env["MEMTAP_BENCH_RUSAGE_DIR"] = rudir
    r = Run()
    stdin = open(spec["stdin"], "rb") if "stdin" in spec else subprocess.DEVNULL
    with open(os.path.join(work, "stdout"), "wb+") as out, \
            open(os.path.join(work, "stderr"), "wb+") as err:
        t0 = time.perf_counter()
        m0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        try:  # pinned: the runner's own affinity is inherited (and keeps vfork usable)
            proc = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, env=env)
        except OSError as e:
            r.stderr = str(e).encode()
            return r
        _, status, ru = os.wait4(proc.pid, 0)
        r.wall = time.perf_counter() - t0
        m1 = time.clock_gettime(time.CLOCK_MONOTONIC)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        r.stdout, r.stderr = out.read(), err.read()
    if stdin is not subprocess.DEVNULL:
        stdin.close()
    r.ok = proc.returncode == 0
    r.cpu = ru.ru_utime + ru.ru_stime
    r.rss_kb = ru.ru_maxrss
    entries = read_rusage_dir(rudir)
    if entries:
        prog = os.path.realpath(argv_program(spec))
        mine = [e for e in entries if e[0] == prog]
        others = [e for e in entries if e[0] != prog]
        if mine:
            r.prog_rss_kb = max(e[1] for e in mine)
            r.prog_cpu = sum(e[2] for e in mine)
            if all(e[3] is not None for e in mine):
                r.prog_minflt = sum(e[3] for e in mine)
            if all(e[4] is not None for e in mine):
                r.prog_vcsw = sum(e[4] for e in mine)
                r.prog_ivcsw = sum(e[5] for e in mine)
            if others and all(e[4] is not None for e in others):
                r.tracer_vcsw = sum(e[4] for e in others)
            if others:
                r.tracer_cpu = max(0.0, r.cpu - r.prog_cpu)
            if all(e[6] is not None for e in mine):
                r.start_ms = (min(e[6] for e in mine) - m0) * 1000
                r.tail_ms = (m1 - max(e[7] for e in mine)) * 1000
        if others:
            r.tracer_rss_kb = max(e[1] for e in others)
    traces = [n for n in os.listdir(work) if n.startswith("trace")]
    if traces:
        r.trace_bytes = sum(os.path.getsize(os.path.join(work, n)) for n in traces)
    return r


def argv_program(spec):
    p = spec["argv"][0]
    return p if os.path.isabs(p) else shutil.which(p) or p


def memtap_has_record(memtap):
    if not memtap or not os.access(memtap, os.X_OK):
        return False
    p = subprocess.run([memtap, "record", "--help"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return p.returncode == 0


def trace_events(memtap, path):
    """(allocations, collections) from `memtap info`, or None."""
    p = subprocess.run([memtap, "info", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    # Counts may have thousands separators ("41,679 allocations").
    m = re.search(r"events:\s+([\d,]+) allocations.*?([\d,]+) collections", p.stdout)
    return (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) if m else None


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 4:
        return xs[0], xs[-1]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def fmt_bytes(n):
    if n is None:
        return "n/a"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


def median_of(runs, attr):
    xs = [getattr(r, attr) for r in runs if r.ok and getattr(r, attr) is not None]
    return statistics.median(xs) if xs else None


def measure_program(args, name, spec, work):
    modes = [m for m in args.modes if m in args.available]
    results = {m: [] for m in args.modes}
    reference = None
    failed = set()
    # One discarded round, at a tenth of the work, warms the page cache and checks that every mode
    # works at all.
    for mode in modes:
        r = run_once(args, spec, mode, work, args.scale * 0.1)
        if not r.ok:
            failed.add(mode)
            tail = r.stderr.decode(errors="replace").strip().splitlines()[-3:]
            print("  %s: %s failed: %s" % (name, mode, " | ".join(tail)), file=sys.stderr)
    modes = [m for m in modes if m not in failed]
    r = run_once(args, spec, "untraced", work)
    reference = r.stdout if r.ok else None
    for i in range(args.runs):
        order = modes[i % len(modes):] + modes[:i % len(modes)]  # rotate: no mode always first
        if i % 2:
            # A -base mode and its pair change places every other round: with the rotation, each
            # runs before the other about as often, so that the order (a warm page cache, the
            # CPU's frequency) does not bias their per-round ratio.
            for base, pair in BASE_MODES.items():
                if base in order and pair in order:
                    a, b = order.index(base), order.index(pair)
                    order[a], order[b] = order[b], order[a]
        for mode in order:
            r = run_once(args, spec, mode, work)
            if r.ok and reference is not None and reference not in r.stdout:
                r.ok = False
                print("  %s: %s changed the program's output" % (name, mode), file=sys.stderr)
            results[mode].append(r)
        print("  %s: round %d/%d" % (name, i + 1, args.runs), file=sys.stderr, end="\r")
        if STOP:
            print("\n  %s: stopped after round %d (SIGUSR1)" % (name, i + 1), file=sys.stderr)
            break
    print(file=sys.stderr)
    extra = {}
    # Event counts and the writer's own speed, on a full trace recorded once more (untimed).
    if "full" in modes:
        r = run_once(args, spec, "full", work)
        trace = os.path.join(work, "trace.ctf")
        if r.ok and os.path.exists(trace):
            extra["events"] = trace_events(args.memtap, trace)
            extra["writer"] = writer_speed(args, trace, work)
    return results, extra, failed


def writer_speed(args, trace, work):
    out = {}
    p = subprocess.run([args.writer_bench, trace, os.path.join(work, "rewritten.ctf"), "5",
                        str(args.writer_events)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    m = re.search(r"= ([0-9.]+) M events/s", p.stdout)
    if m:
        out["writer_meps"] = float(m.group(1))
    ev = trace_events(args.memtap, trace)
    if ev:
        t0 = time.perf_counter()
        c = subprocess.run([args.memtap, "copy", trace, os.path.join(work, "copied.ctf")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if c.returncode == 0:
            out["copy_meps"] = (ev[0] + ev[1]) / (time.perf_counter() - t0) / 1e6
    return out


def spread(xs):
    lo, hi = quartiles(xs)
    return "%.2f-%.2f" % (lo, hi)


def ratio_list(results, mode, attr):
    """Per-round ratios mode/untraced, rounds where both succeeded."""
    out = []
    for r, u in zip(results[mode], results["untraced"]):
        a, b = getattr(r, attr), getattr(u, attr)
        if r.ok and u.ok and a and b:
            out.append(a / b)
    return out


def print_program(args, name, spec, results, extra, failed):
    argv = " ".join(os.path.basename(a) if i == 0 else a
                    for i, a in enumerate(scaled(spec, args.scale)))
    n = len(results.get("untraced", []))
    print("\n== %s: %s%s, %d rounds, CPUs %s" % (
        name, argv, " < " + os.path.basename(spec["stdin"]) if "stdin" in spec else "", n,
        ",".join(map(str, sorted(args.cpu_set)))))
    events = extra.get("events")
    nev = sum(events) if events else None
    hdr = ("%-12s %7s %11s  %6s %11s %11s  %7s %6s %11s %11s  %6s %9s %8s %7s %9s %8s %7s "
           "%8s %7s %10s %8s"
           % ("mode", "wall s", "IQR", "x wall", "IQR", "min-max", "cpu s", "x cpu", "IQR",
              "min-max", "x prog", "prog RSS", "prog flt", "prog cs", "trc RSS", "trc cpu",
              "trc cs", "start ms", "tail ms", "trace", "B/event"))
    print(hdr)
    for mode in args.modes:
        rs = [r for r in results.get(mode, []) if r.ok]
        if not rs:
            why = "failed" if mode in failed else "n/a"
            print("%-12s %s" % (mode, why))
            continue
        walls = [r.wall for r in rs]
        cpus = [r.cpu for r in rs]
        rw = ratio_list(results, mode, "wall") if "untraced" in results else []
        rc = ratio_list(results, mode, "cpu") if "untraced" in results else []
        tb = median_of(rs, "trace_bytes")
        per_event = "-"
        if tb is not None and nev and mode in ("full", "full-base", "full-zst", "full-zst-ms",
                                               "heaptrack"):
            per_event = "%.2f" % (tb / nev)
        trc_cpu = median_of(rs, "tracer_cpu")
        prss = median_of(rs, "prog_rss_kb")
        trss = median_of(rs, "tracer_rss_kb")
        pflt = median_of(rs, "prog_minflt")
        pics = median_of(rs, "prog_ivcsw")
        tvcs = median_of(rs, "tracer_vcsw")
        start = median_of(rs, "start_ms")
        tail = median_of(rs, "tail_ms")
        # The program's own CPU against the untraced run's: what the shim (or the floor, or
        # heaptrack's preload library) costs the program, apart from any consumer process.
        rp = prog_ratio_list(results, mode)
        print(("%-12s %7.3f %11s  %6s %11s %11s  %7.3f %6s %11s %11s  %6s %9s %8s %7s %9s %8s "
               "%7s %8s %7s %10s %8s") % (
            mode, statistics.median(walls), spread(walls),
            "%.2f" % statistics.median(rw) if rw else "-", spread(rw) if rw else "-",
            "%.2f-%.2f" % (min(rw), max(rw)) if rw else "-",
            statistics.median(cpus), "%.2f" % statistics.median(rc) if rc else "-",
            spread(rc) if rc else "-", "%.2f-%.2f" % (min(rc), max(rc)) if rc else "-",
            "%.2f" % statistics.median(rp) if rp else "-",
            fmt_bytes(prss * 1024) if prss else "n/a", "%d" % pflt if pflt is not None else "-",
            "%d" % pics if pics is not None else "-",
            fmt_bytes(trss * 1024) if trss else "-",
            "%.3f" % trc_cpu if trc_cpu is not None else "-",
            "%d" % tvcs if tvcs is not None else "-",
            "%.1f" % start if start is not None else "-",
            "%.1f" % tail if tail is not None else "-",
            fmt_bytes(tb) if tb is not None else "-", per_event))
    if events:
        print("events (full trace): %d allocations + %d frees = %d" % (events[0], events[1], nev))
    goals = goal_cells(results)
    print("goals, per round, median [min-max], wall | cpu: sampled / floor %s | %s; "
          "(full - 1) / (heaptrack - 1) %s | %s" % goals[:4])
    # The shim against the floor apart from memtap's own process: the program's CPU alone.
    print("sampled / floor, the program's own CPU: %s" % goals[4])
    for base, cells in zip(BASE_MODES, goals[5:]):
        if base in results:
            print("%s / %s (the other memtap, same rounds), per round, median [min-max], wall | "
                  "cpu | the program's own CPU | the tracer's CPU: %s | %s | %s | %s" % (
                      BASE_MODES[base], base, *cells))
    w = extra.get("writer", {})
    if w:
        print("writer on this stream: %s M events/s encoding only (bench_tracer_writer); "
              "memtap copy (decode + encode): %s M events/s" % (
                  "%.1f" % w["writer_meps"] if "writer_meps" in w else "n/a",
                  "%.1f" % w["copy_meps"] if "copy_meps" in w else "n/a"))


def prog_ratio_list(results, mode):
    """Per-round ratios of the program's own CPU (rusage report) to the untraced run's."""
    out = []
    for r, u in zip(results.get(mode, []), results.get("untraced", [])):
        if r.ok and u.ok and r.prog_cpu and u.prog_cpu:
            out.append(r.prog_cpu / u.prog_cpu)
    return out


def paired(results, a, b, attr, f, untraced=True):
    """f(x_a, x_b, x_untraced) per round where all three succeeded (without `untraced`: where a
    and b did, x_untraced None; for what an untraced run has not, such as the tracer's CPU)."""
    out = []
    if a not in results or b not in results:
        return out
    for k, (ra, rb) in enumerate(zip(results[a], results[b])):
        xa, xb = getattr(ra, attr), getattr(rb, attr)
        if not (ra.ok and rb.ok and xa and xb):
            continue
        xu = None
        if untraced:
            u = results["untraced"][k] if k < len(results["untraced"]) else None
            xu = getattr(u, attr) if u is not None and u.ok else None
            if not xu:
                continue
        out.append(f(xa, xb, xu))
    return out


def print_summary(args, all_results):
    print("\n== Summary: median ratio to untraced in the same round, wall (cpu of the whole tree) "
          "[cpu of the program alone]")
    modes = [m for m in args.modes if m != "untraced"]
    print("%-11s" % "program" + "".join("%22s" % m for m in modes))
    for name, results in all_results:
        cells = []
        for mode in modes:
            rw = ratio_list(results, mode, "wall") if mode in results else []
            rc = ratio_list(results, mode, "cpu") if mode in results else []
            rp = prog_ratio_list(results, mode) if mode in results else []
            cell = "n/a"
            if rw and rc:
                cell = "%.2f (%.2f)" % (statistics.median(rw), statistics.median(rc))
                cell += " [%.2f]" % statistics.median(rp) if rp else " [-]"
            cells.append("%22s" % cell)
        print("%-11s" % name + "".join(cells))
    # The goals of the speed issue, per round: sampled against the floor, and full tracing's
    # overhead (traced / untraced - 1) as a fraction of heaptrack's.
    print("\n== Goals: sampled / floor (goal <= 1.02), full overhead / heaptrack overhead "
          "(goal <= 0.20); median [min-max] of per-round values, wall | cpu | [cpu of the "
          "program alone]")
    print("%-11s %-44s %-36s" % ("program", "sampled / floor", "(full-1) / (heaptrack-1)"))
    for name, results in all_results:
        sw, sc, fw, fc, sp = goal_cells(results)[:5]
        print("%-11s %-44s %-36s" % (name, sw + " | " + sc.split(" ")[0] + " [" +
                                      sp.split(" ")[0] + "]", fw + " | " + fc.split(" ")[0]))
    # What memtap adds per run whatever the program's length: its own CPU, the time from the
    # spawn to the program's start and from the program's exit to its own (less sensitive to the
    # machine's load than the ratios).
    fixed = [m for m in ("floor", "sampled", "sampled-base") if m in args.modes]
    print("\n== Fixed cost per run, median ms: tracer CPU (the tree minus the program) / start "
          "(spawn to the program's start) / tail (the program's exit to the command's)")
    print("%-11s" % "program" + "".join("%24s" % m for m in ["untraced"] + fixed))
    for name, results in all_results:
        cells = []
        for mode in ["untraced"] + fixed:
            rs = [r for r in results.get(mode, []) if r.ok]
            vals = [median_of(rs, "tracer_cpu"), median_of(rs, "start_ms"),
                    median_of(rs, "tail_ms")]
            if vals[0] is not None:
                vals[0] *= 1000
            cells.append("%24s" % " / ".join("%.1f" % v if v is not None else "-" for v in vals))
        print("%-11s" % name + "".join(cells))


def goal_cells(results):
    def cell(xs):
        return ("%.3f [%.3f-%.3f]" % (statistics.median(xs), min(xs), max(xs))) if xs else "n/a"

    sf = [cell(paired(results, "sampled", "floor", k, lambda a, b, u: a / b))
          for k in ("wall", "cpu", "prog_cpu")]
    fh = [cell(paired(results, "full", "heaptrack", k,
                      lambda a, b, u: (a / u - 1) / (b / u - 1) if b > u else float("inf")))
          for k in ("wall", "cpu")]
    # Before and after a change (--memtap-base): the ratio per round, so that a drift of the
    # machine between rounds cancels out; the program's and the tracer's CPU apart, as a change
    # usually moves one of them.
    bases = [[cell(paired(results, mode, base, k, lambda a, b, u: a / b, untraced=False))
              for k in ("wall", "cpu", "prog_cpu", "tracer_cpu")]
             for base, mode in BASE_MODES.items()]
    return (sf[0], sf[1], fh[0], fh[1], sf[2], *bases)


def main():
    ap = argparse.ArgumentParser(description=__doc__ or "memtap tracer benchmark")
    ap.add_argument("--build", default=os.environ.get("MEMTAP_BUILD",
                                                      os.path.join(HERE, "..", "..", "build")),
                    help="the build directory (default $MEMTAP_BUILD or <repo>/build)")
    ap.add_argument("--memtap", help="the memtap executable (default <build>/memtap)")
    ap.add_argument("--memtap-base",
                    help="another memtap executable (e.g. a build of the last commit), run as "
                    "modes sampled-base and full-base (after sampled and full, whichever --modes "
                    "has) in the same rounds: before and after, alternated, compared per round")
    ap.add_argument("--heaptrack", default=shutil.which("heaptrack") or "/usr/bin/heaptrack")
    ap.add_argument("--runs", type=int, default=15, help="measured rounds (default 15)")
    ap.add_argument("--quick", action="store_true", help="3 rounds, for development")
    ap.add_argument("--programs", default="all",
                    help="comma-separated: churn,churn2,tree,strbuild,containers,sqlite3,python3")
    ap.add_argument("--modes", default=",".join(m for m in MODES if m not in BASE_MODES),
                    help="comma-separated subset of " + ",".join(MODES) +
                    " (the -base modes are added by --memtap-base)")
    ap.add_argument("--cpus", help="CPUs to pin every run to (default: all this process may use)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply each program's work")
    ap.add_argument("--writer-events", type=int, default=5000000,
                    help="events of the full trace the writer benchmark loads (default 5 M)")
    ap.add_argument("--json", help="also write every run's figures to this file")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    progs = programs(args.build)
    if args.list:
        for name, spec in progs.items():
            print("%-11s %s" % (name, " ".join(spec["argv"])))
        return 0
    if args.quick:
        args.runs = 3
    args.memtap = args.memtap or os.path.join(args.build, "memtap")
    tracer_dir = os.path.join(args.build, "bench", "tracer")
    args.floor = os.path.join(tracer_dir, "libbench_tracer_floor.so")
    args.rusage_lib = os.path.join(tracer_dir, "libbench_tracer_rusage.so")
    args.writer_bench = os.path.join(tracer_dir, "bench_tracer_writer")
    args.cpu_set = ({int(c) for c in args.cpus.split(",")} if args.cpus
                    else os.sched_getaffinity(0))
    os.sched_setaffinity(0, args.cpu_set)
    args.modes = [m for m in args.modes.split(",") if m]
    if args.memtap_base:
        # Each base mode right after its pair, for the modes asked for (sampled alone if none).
        if not any(m in args.modes for m in BASE_MODES.values()):
            args.modes.append("sampled")
        for base, mode in BASE_MODES.items():
            if mode in args.modes and base not in args.modes:
                args.modes.insert(args.modes.index(mode) + 1, base)
    bad = [m for m in args.modes if m not in MODES]
    if bad or "untraced" not in args.modes:
        ap.error("modes must include untraced and be among " + ",".join(MODES))
    names = list(progs) if args.programs == "all" else args.programs.split(",")
    unknown = [n for n in names if n not in progs]
    if unknown:
        ap.error("unknown program(s): " + ",".join(unknown))
    for f in (args.floor, args.rusage_lib):
        if not os.path.exists(f):
            ap.error("%s is missing: build the bench_tracer_* targets in %s" % (f, args.build))
    args.available = {"untraced", "floor"}
    if memtap_has_record(args.memtap):
        args.available |= set(MEMTAP_MODES) - set(BASE_MODES)
    else:
        print("memtap record is not available (%s): its columns are n/a" % args.memtap,
              file=sys.stderr)
    if args.memtap_base:
        if memtap_has_record(args.memtap_base):
            args.available |= set(BASE_MODES)
        else:
            print("memtap record is not available (%s): the -base modes are n/a" %
                  args.memtap_base, file=sys.stderr)
    if os.access(args.heaptrack, os.X_OK):
        args.available.add("heaptrack")

    print("memtap tracer benchmark: %s, %d rounds, modes alternated, %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S %Z"), args.runs, os.uname().nodename))
    all_results = []
    dump = {}
    signal.signal(signal.SIGUSR1, request_stop)
    work = tempfile.mkdtemp(prefix="memtap-bench-tracer.")
    try:
        for name in names:
            spec = progs[name]
            results, extra, failed = measure_program(args, name, spec, work)
            print_program(args, name, spec, results, extra, failed)
            sys.stdout.flush()
            all_results.append((name, results))
            dump[name] = {"extra": extra, "runs": {m: [vars(r) | {"stdout": None, "stderr": None}
                                                       for r in rs]
                                                   for m, rs in results.items()}}
            if args.json:  # after each program, so that a stopped run keeps what it measured
                with open(args.json, "w") as f:
                    json.dump(dump, f, indent=1)
            if STOP:
                break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_summary(args, all_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
