#!/usr/bin/env python3
"""Checks memtap's HTML report (issue 12's acceptance; stdlib only).

  check_report.py mass MEMTAP TRACE      the flame graph keeps the mass: at most 5% of the bytes
                                         in "(smaller callees)" boxes, and the 20 heaviest lines
                                         of `memtap flame --folded` present to their full depth
                                         with their value (read from the embedded data); the file
                                         refers to nothing outside itself
  check_report.py range MEMTAP TRACE     headless Chromium: a range dragged on the heap chart
                                         snaps to the steps and makes the sites and functions
                                         tables and the flame graph show what `memtap top`,
                                         `memtap functions` and `memtap flame --folded` print for
                                         the snapped --from/--to, for "allocated" and for
                                         "still live"
  check_report.py page MEMTAP TRACE      headless Chromium: the first screen shows the heaviest
                                         path; sorting by every column; table search and its
                                         "N of M sites"; flame search and its share; callers and
                                         callees of a clicked frame add up and equal `memtap
                                         callers`; a filter applied with
                                         Enter lands in the URL and the summary, and the URL
                                         alone gives the same view; hovering the heap chart
                                         shows values; the layout follows the window's width; no
                                         console message anywhere
  check_report.py objects MEMTAP TRACE   headless Chromium: every site's estimated objects in the
                                         page's sites table (whole trace, allocated) equal `memtap
                                         top`'s (`allocated.objects_estimated`): one rounding rule
  check_report.py diff MEMTAP A B        `report A --diff B` renders both traces' totals and
                                         per-site values equal to `top --json` of each, in
                                         `memtap diff`'s order with its sampling-noise marks
  check_report.py diff-full MEMTAP       the same on two traces recorded with --full (awk filling
                                         arrays of two sizes): every allocation recorded, so no
                                         change is within sampling noise and none is marked `~`

A missing tool or test file skips (exit 77) unless CI=true, where it fails."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devtools import Browser  # noqa: E402
from toolcheck import need_files, run  # noqa: E402 (devtools puts it on the path)


def fail(msg):
    sys.exit("FAIL: " + msg)


def report_data(html):
    with open(html, encoding="utf-8") as f:
        text = f.read()
    start = text.index('<script id="memtap-data" type="application/json">')
    start = text.index(">", start) + 1
    return text, json.loads(text[start:text.index("</script>", start)])


def make_report(memtap, trace, tmp, *extra):
    html = os.path.join(tmp, "report.html")
    run([memtap, "report", *extra, trace, "-o", html])
    return html


def folded(memtap, trace, *extra):
    """`memtap flame --folded` as [(names, value)]."""
    out = []
    for line in run([memtap, "flame", "--folded", *extra, trace]).splitlines():
        path, _, value = line.rpartition(" ")
        out.append((path.split(";"), int(value)))
    return out


def name_paths(ds):
    """The embedded trie as function-name paths: {tuple(names): samples} over every prefix, as
    report.js merges it (names, not frames), and the samples in "(smaller callees)" boxes."""
    frames, nodes, stacks = ds["frames"], ds["nodes"], ds["stacks"]
    n = len(nodes) // 2
    paths = []
    for i in range(n):
        parent = i - nodes[2 * i]
        name = frames[nodes[2 * i + 1]][0]
        paths.append((paths[parent] if parent >= 0 else ()) + (name,))
    per_stack = [0] * (len(stacks) // 2)
    rows = ds["cells"]["rows"]
    for j in range(0, len(rows), 8):
        if rows[j + 1] != 255:  # allocated in the window
            per_stack[rows[j]] += rows[j + 6]
    value, pruned = {}, 0
    for s, samples in enumerate(per_stack):
        node = stacks[2 * s]
        path = paths[node] if node >= 0 else ("<no backtrace>",)
        if path[-1] == "(smaller callees)":
            pruned += samples
        for k in range(1, len(path) + 1):
            value[path[:k]] = value.get(path[:k], 0) + samples
    return value, pruned, sum(per_stack)


def check_mass(memtap, trace, tmp):
    html = make_report(memtap, trace, tmp)
    text, data = report_data(html)
    for bad in ("src=\"http", "href=\"http", "@import", "fetch(", "XMLHttpRequest", "url("):
        if bad in text:
            fail(f"the report refers to something outside itself: {bad}")
    if len(text.encode()) > 16_000_000:
        fail(f"the report is {len(text.encode())} bytes, over its 16 MB cap")
    ds = data["traces"][0]
    value, pruned, total = name_paths(ds)
    summary = json.loads(run([memtap, "summary", "--json", trace]))
    if total != summary["allocated"]["samples"]:
        fail(f"the report's rows hold {total} samples, the summary {summary['allocated']}")
    share = pruned / total
    if share > 0.05:
        fail(f"{100 * share:.2f}% of the bytes are in pruned boxes (at most 5%)")
    print(f"ok: {100 * share:.3f}% of the bytes in pruned boxes; "
          f"trie {ds['trie']}; {len(text.encode())} bytes")
    bps = ds["summary"]["bytes_per_sample"]
    lines = sorted(folded(memtap, trace), key=lambda l: -l[1])[:20]
    for names, v in lines:
        got = value.get(tuple(names))
        if got is None:
            deepest = max(k for k in range(len(names) + 1) if tuple(names[:k]) in value or k == 0)
            fail(f"folded path of depth {len(names)} ({v} B) is cut at depth {deepest}: "
                 f"{';'.join(names[:deepest + 1])}")
        # The folded line counts only backtraces ending there; the trie's prefix counts deeper
        # ones too: at least the line's value, to the sample.
        if got * bps < v - bps:
            fail(f"folded path {';'.join(names)}: {v} B, the report has {got * bps:.0f} B")
    print(f"ok: the 20 heaviest folded paths (depths {[len(n) for n, _ in lines]}) are whole")


SITES = """(() => [...document.querySelectorAll("#sites tbody tr")].map((tr) =>
    [tr.cells[0].textContent, Number(tr.dataset.bytes)]))()"""


def site_label(key):
    line = f":{key['line']}" if key["line"] > 0 else ""
    return key["function"] + (f" {key['file']}{line}" if key["file"] else "")


def compare_with_cli(browser, memtap, trace, bps, live):
    """The sites table and the flame graph's first level against the CLI for the page's range."""
    sel = browser.evaluate("""(() => ({from: Number(document.body.dataset.selFrom),
        to: Number(document.body.dataset.selTo), cli: document.getElementById("cli").textContent,
        total: Number(document.body.dataset.selBytes)}))()""")
    args = sel["cli"].split()[2:-1]  # "memtap top [--by live] --from A --to B TRACE"
    if "--from" not in args or "--to" not in args:
        fail(f"the page gives no window for its range: {sel}")
    top = json.loads(run([memtap, "top", "--json", "-n", "0", *args, trace]))
    metric = "live" if live else "allocated"
    want = {site_label(g["key"]): g[metric]["samples"] for g in top["groups"]}
    rows = browser.evaluate(SITES)
    page = {name: round(b / bps) for name, b in rows}
    if len(rows) < 10:
        fail(f"the range shows only {len(rows)} sites")
    for name, samples in page.items():
        if want.get(name, 0) != samples:
            fail(f"range {args}: site {name}: page {samples} samples, CLI {want.get(name, 0)}")
    heaviest = sorted(want.items(), key=lambda kv: -kv[1])[:len(rows)]
    if any(page.get(k) != v for k, v in heaviest[:50]):
        fail(f"range {args}: the page's heaviest sites differ from the CLI's")
    if round(sel["total"] / bps) != sum(want.values()):
        fail(f"range {args}: summary {sel['total'] / bps} samples, CLI {sum(want.values())}")
    # The functions table: inclusive and exclusive bytes as `memtap functions` (cum and flat).
    funcs = json.loads(run([memtap, "functions", "--json", "-n", "0", "--by",
                            "live" if live else "bytes", *args[2 if live else 0:], trace]))
    cli_fn = {r["key"]["function"]: (r["cum"]["value"], r["flat"]["value"]) for r in funcs["rows"]}
    page_fn = browser.evaluate("""[...document.querySelectorAll("#functions tbody tr")].map((tr) =>
        [tr.cells[0].textContent, Number(tr.dataset.bytes), Number(tr.dataset.exclusive)])""")
    if len(page_fn) < 20:
        fail(f"range {args}: the functions table has {len(page_fn)} rows")
    for name, inc, exc in page_fn:
        want_inc, want_exc = cli_fn.get(name, (0, 0))
        if abs(inc - want_inc) > 1 or abs(exc - want_exc) > 1:
            fail(f"range {args}: function {name}: page inclusive {inc} exclusive {exc}, "
                 f"`memtap functions` cum {want_inc} flat {want_exc}")
    # Every box of the flame graph's first 16 levels: the CLI's folded lines under a path with that
    # depth and last name add up to its bytes.
    prefix = {}
    for names, v in folded(memtap, trace, *args, *(["--by", "live"] if live else [])):
        for d in range(1, min(len(names), 16) + 1):
            prefix[tuple(names[:d])] = prefix.get(tuple(names[:d]), 0) + v
    by_end = {}
    for path, v in prefix.items():
        by_end.setdefault((len(path), path[-1]), []).append(v)
    boxes = browser.evaluate("""(() => [...document.querySelectorAll("#flame g")].filter((g) =>
        g.dataset.depth > 0 && g.dataset.depth <= 16).map((g) => [Number(g.dataset.depth),
        g.dataset.name, Number(g.dataset.bytes)]))()""")
    if len(boxes) < 20:
        fail(f"only {len(boxes)} flame graph boxes below the root")
    for depth, name, b in boxes:
        if not any(abs(v - b) <= bps * 0.01 + depth for v in by_end.get((depth, name), [])):
            fail(f"range {args}: flame box {name} at depth {depth}: page {b} B, CLI has "
                 f"{sorted(by_end.get((depth, name), []))[-5:]}")
    print(f"ok: {'live' if live else 'allocated'} {args}: {len(rows)} sites, {len(page_fn)} "
          f"functions and {len(boxes)} flame boxes (16 levels) equal the CLI's; {sel['total']} B")
    return sel


def check_range(memtap, trace, tmp):
    html = make_report(memtap, trace, tmp)
    _, data = report_data(html)
    ds = data["traces"][0]
    bps = ds["summary"]["bytes_per_sample"]
    b = Browser(tmp)
    try:
        b.open("file://" + html)
        whole = b.evaluate(SITES)
        box = b.evaluate("""(() => { const r = document.getElementById("heap")
            .getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()""")
        x, y, w, h = box
        # From 30% to 55% of the plot (its left margin is 64 px).
        x0, x1 = x + 64 + (w - 70) * 0.30, x + 64 + (w - 70) * 0.55
        b.after(lambda: b.drag(x0, y + h / 2, x1, y + h / 2))
        sel = compare_with_cli(b, memtap, trace, bps, live=False)
        width = ds["cells"]["width"]
        start = ds["summary"]["from_us"]
        for edge in (sel["from"], sel["to"]):
            if (edge - start) % width and edge != ds["summary"]["to_us"]:
                fail(f"range edge {edge} µs is not on a step of {width} µs")
        typed = b.evaluate("[document.getElementById('f-from').value, "
                           "document.getElementById('f-to').value]")
        if [float(v) for v in typed] != [sel["from"] / 1e6, sel["to"] / 1e6]:
            fail(f"the form shows {typed}, not the snapped range {sel}")
        if b.evaluate(SITES) == whole:
            fail("dragging a range did not change the sites table")
        b.after(lambda: b.evaluate("""(() => { const s = document.getElementById("f-show");
            s.value = "live"; s.dispatchEvent(new Event("change")); })()"""))
        compare_with_cli(b, memtap, trace, bps, live=True)
        problems = b.problems()
        if problems:
            fail("the page logged:\n" + "\n".join(problems))
    finally:
        b.close()


def heaviest_path_on_screen(b):
    """Follows the widest child from the root in the DOM; every box must be inside the viewport
    and labelled. Returns the path's names."""
    return b.evaluate("""(() => {
        const gs = [...document.querySelectorAll("#flame g")];
        const byDepth = new Map();
        for (const g of gs) {
            const d = Number(g.dataset.depth);
            if (!byDepth.has(d)) byDepth.set(d, []);
            byDepth.get(d).push(g);
        }
        const path = [];
        let cur = byDepth.get(0)[0];
        for (let d = 1; cur; d++) {
            const r = cur.querySelector("rect").getBoundingClientRect();
            path.push({name: cur.dataset.name, top: r.top, bottom: r.bottom, left: r.left,
                       width: r.width, label: cur.querySelector("text") ?
                       cur.querySelector("text").textContent : ""});
            const x0 = r.left, x1 = r.right;
            let best = null, bw = 0;
            for (const g of byDepth.get(d) || []) {
                const q = g.querySelector("rect").getBoundingClientRect();
                if (q.left >= x0 - 0.5 && q.right <= x1 + 0.5 && q.width > bw) {
                    best = g; bw = q.width;
                }
            }
            if (best && bw < 1) best = null;
            cur = best;
        }
        return {path, height: window.innerHeight, width: window.innerWidth,
                scroll: window.scrollY};
    })()""")


def compare_panel(b, memtap, trace, target, inclusive):
    """The callers panel shows what `memtap callers --json ^TARGET$` prints."""
    regex = "^" + "".join("\\" + ch if ch in ".[]()*+?{}|^$\\" else ch for ch in target) + "$"
    cli = json.loads(run([memtap, "callers", "--json", regex, trace]))["functions"][0]
    want_in = {e["function"] or "(the start of the backtrace)": e["value"] for e in cli["callers"]}
    want_out = {e["function"]: e["value"] for e in cli["callees"]}
    if cli["flat"]:
        want_out["(allocated by the function itself)"] = cli["flat"]
    shown = b.evaluate("""["callers-in", "callers-out"].map((id) =>
        [...document.querySelectorAll("#" + id + " tbody tr")].map((tr) =>
            [tr.cells[0].textContent, Number(tr.dataset.bytes)]))""")
    if not shown[0] or not shown[1]:
        fail(f"no callers panel for {target}: {shown}")
    for (side, want), rows in zip((("callers", want_in), ("callees", want_out)), shown):
        for name, value in rows:
            if abs(want.get(name, 0) - value) > 1:
                fail(f"{target}: {side} {name}: page {value} B, `memtap callers` "
                     f"{want.get(name, 0)} B")
    if abs(cli["cum"] - inclusive) > 1:
        fail(f"{target}: page inclusive {inclusive} B, `memtap callers` cum {cli['cum']} B")
    print(f"ok: the panel of {target} ({len(shown[0])} callers, {len(shown[1])} callees) equals "
          f"`memtap callers {regex}`")


def check_page(memtap, trace, tmp):
    html = make_report(memtap, trace, tmp)
    b = Browser(tmp)
    try:
        b.open("file://" + html)
        mark = b.evaluate("performance.getEntriesByName('memtap-drawn').length")
        if mark != 1:
            fail("the page set no 'memtap-drawn' performance mark")
        hp = heaviest_path_on_screen(b)
        path = hp["path"]
        if len(path) < 5:
            fail(f"the heaviest path is only {len(path)} boxes: {path}")
        off = [p for p in path if p["bottom"] > hp["height"] or p["top"] < 0]
        if off or hp["scroll"]:
            fail(f"the heaviest path ({len(path)} boxes) leaves the first screen "
                 f"({hp['width']}x{hp['height']}): {off[:3]}")
        unlabelled = [p["name"] for p in path if p["width"] > 60 and not p["label"]]
        if unlabelled:
            fail(f"wide boxes of the heaviest path without a label: {unlabelled}")
        print(f"ok: the heaviest path's {len(path)} boxes are on the first screen, the last at "
              f"{path[-1]['bottom']:.0f} px of {hp['height']}: {path[-1]['name']}")

        # Sorting: every column of both tables, both directions.
        for table in ("sites", "functions"):
            ncols = b.evaluate(f"document.querySelectorAll('#{table} th').length")
            for col in range(ncols):
                for _ in range(2):
                    b.click(f"#{table} th:nth-child({col + 1})")
                    state = b.evaluate(f"""(() => {{
                        const th = document.querySelector('#{table} th:nth-child({col + 1})');
                        const vals = [...document.querySelectorAll('#{table} tbody tr')].map(
                            (tr) => [tr.cells[{col}].textContent, Number(tr.dataset.bytes)]);
                        return {{sorted: th.classList.contains('sorted'),
                                 asc: th.classList.contains('asc'), vals}}; }})()""")
                    if not state["sorted"]:
                        fail(f"{table} column {col} is not marked sorted after a click")
                    vals = state["vals"]
                    if col == 0:
                        keys = [v[0] for v in vals]
                        ok = keys == sorted(keys) if state["asc"] else keys == sorted(keys,
                                                                                      reverse=True)
                    else:
                        num = [parse_number(v[0]) for v in vals]
                        ok = all((p <= q if state["asc"] else p >= q) for p, q in zip(num, num[1:]))
                    if not ok or len(vals) < 2:
                        fail(f"{table} sorted by column {col} ({'asc' if state['asc'] else 'desc'})"
                             f" is not in order: {vals[:6]}")
            print(f"ok: {table}: all {ncols} columns sort both ways")

        # Search in a table and the "N of M" line.
        total_text = b.evaluate("document.getElementById('sites-count').textContent")
        m = total_text.split()
        if not (m[1] == "of" and m[3] == "sites" and int(m[0]) <= int(m[2])):
            fail(f"sites count line {total_text!r}")
        first_site = b.evaluate("document.querySelector('#sites tbody tr td').textContent")
        needle = first_site.split(" ")[0]
        b.type_into("sites-search", needle)
        b.evaluate("document.getElementById('sites-search').dispatchEvent(new Event('input'))")
        found = b.evaluate("""[document.getElementById('sites-count').textContent,
            [...document.querySelectorAll('#sites tbody tr')].map((tr) => tr.cells[0].textContent)]""")
        if not found[1] or any(needle.lower() not in n.lower() for n in found[1]) or \
                "matching" not in found[0]:
            fail(f"searching sites for {needle!r}: {found}")
        print(f"ok: search {needle!r}: {found[0]}")

        # Flame search: matches highlighted, their share shown.
        fn = needle
        b.after(lambda: b.type_into("flame-search", fn, enter=True))
        share = b.evaluate("""[document.body.dataset.searchShare,
            document.getElementById('flame-match').textContent,
            document.querySelectorAll('#flame rect.hit').length]""")
        if not share[0] or not 0 < float(share[0]) <= 1 or not share[2] or "%" not in share[1]:
            fail(f"flame search for {fn!r}: {share}")
        print(f"ok: flame search {fn!r}: {share[1]}, {share[2]} boxes highlighted")

        # Callers and callees of a clicked frame: both sides add up to its inclusive bytes.
        target = path[min(len(path) - 1, 6)]["name"]
        b.after(lambda: b.click(f"#flame g[data-name={json.dumps(target)}][data-depth='"
                                f"{min(len(path) - 1, 6)}'] rect"))
        panel = b.evaluate("""(() => ({name: document.body.dataset.callers,
            inc: Number(document.getElementById('callers').dataset.inclusive),
            callers: [...document.querySelectorAll('#callers-in tbody tr')].map((tr) =>
                Number(tr.dataset.bytes)),
            callees: [...document.querySelectorAll('#callers-out tbody tr')].map((tr) =>
                Number(tr.dataset.bytes))}))()""")
        if panel["name"] != target or not panel["callers"] or not panel["callees"]:
            fail(f"clicking {target!r} gave the callers panel {panel}")
        for side in ("callers", "callees"):
            if abs(sum(panel[side]) - panel["inc"]) > len(panel[side]) + 1:
                fail(f"{target}: {side} add up to {sum(panel[side])}, inclusive {panel['inc']}")
        print(f"ok: callers panel of {target}: {len(panel['callers'])} callers, "
              f"{len(panel['callees'])} callees, both adding up to {panel['inc']} B")
        compare_panel(b, memtap, trace, target, panel["inc"])
        # A function that calls itself through others: callers of its outermost call, callees of
        # its innermost one.
        b.open("file://" + html + "#function=Typecore.type_expect")
        inc = b.evaluate("Number(document.getElementById('callers').dataset.inclusive)")
        compare_panel(b, memtap, trace, "Typecore.type_expect", inc)

        # A filter applied with Enter: in the URL, in the summary; the URL alone redraws it.
        before = b.evaluate("document.getElementById('selection').textContent")
        b.after(lambda: b.type_into("f-size-min", "1000", enter=True))
        after = b.evaluate("""[location.hash, document.getElementById('selection').textContent,
            document.body.dataset.selBytes]""")
        if "size_min=1000" not in after[0] or after[1] == before or "size" not in after[1]:
            fail(f"size filter applied with Enter: url {after[0]!r}, summary {after[1]!r}")
        url = "file://" + html + after[0]
        b.open(url)
        again = b.evaluate("""[document.getElementById('f-size-min').value,
            document.body.dataset.selBytes]""")
        if again != ["1000", after[2]]:
            fail(f"opening {url} shows {again}, not {['1000', after[2]]}")
        print(f"ok: Enter applies, the URL {after[0]!r} reopens the same view: {after[1]!r}")
        # Hovering the heap chart shows the values at that time.
        x, y, w, h = b.evaluate("""(() => { const e = document.getElementById("heap");
            e.scrollIntoView({block: "center"}); const r = e.getBoundingClientRect();
            return [r.x, r.y, r.width, r.height]; })()""")
        b.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + w * 0.6, y=y + h / 2)
        tip = b.evaluate("""[document.getElementById("heap-tip").hidden,
            document.getElementById("heap-tip").textContent]""")
        if tip[0] or "live heap: " not in tip[1] or " MiB" not in tip[1]:
            fail(f"hovering the heap chart shows {tip}")
        print(f"ok: hover on the heap chart: {tip[1].splitlines()[:2]}")
        # The layout follows the window's width.
        b.after(lambda: b.call("Emulation.setDeviceMetricsOverride", width=900, height=800,
                               deviceScaleFactor=1, mobile=False))
        narrow = b.evaluate("""[window.innerWidth, Number(document.getElementById("flame")
            .getAttribute("width")), document.documentElement.scrollWidth]""")
        if not (narrow[0] == 900 and 800 <= narrow[1] <= 900 and narrow[2] <= 900):
            fail(f"at 900 px wide: window, flame graph and page widths {narrow}")
        print(f"ok: at 900 px the flame graph is {narrow[1]} px wide, nothing wider than the window")
        words = b.evaluate("document.body.innerText")
        for jargon in ("cell", "bucket", "node", "trie"):
            if jargon in words.lower().split():
                fail(f"the page says {jargon!r} to its user")
        problems = b.problems()
        if problems:
            fail("the page logged:\n" + "\n".join(problems))
        print("ok: no console messages")
    finally:
        b.close()


def parse_number(text):
    """A table cell's value: '12.3 MiB', '45.1%', '1.20 M', '+3 KiB', 'new'."""
    t = text.replace(",", "").strip()
    if t in ("–", "new"):
        return float("inf")
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "k": 1e3,
             "M": 1e6, "G": 1e9}
    parts = t.rstrip("%").split()
    v = float(parts[0])
    return v * units[parts[1]] if len(parts) > 1 else v


def resolution(text):
    """Half a unit of the last digit a table cell shows ('7.9 MiB': 0.05 MiB), the error its
    rounding allows."""
    t = text.replace(",", "").strip().rstrip("%").split()
    decimals = len(t[0].split(".")[1]) if "." in t[0] else 0
    return parse_number("0.5 " + t[1] if len(t) > 1 else "0.5") / 10 ** decimals


def check_diff(memtap, a, b_trace, tmp, every_sample=False):
    html = os.path.join(tmp, "diff.html")
    run([memtap, "report", a, "--diff", b_trace, "-o", html])
    _, data = report_data(html)
    if len(data["traces"]) != 2:
        fail("a --diff report does not hold two traces")
    tops = [json.loads(run([memtap, "top", "--json", "-n", "0", t])) for t in (a, b_trace)]
    b = Browser(tmp)
    try:
        b.open("file://" + html)
        rows = b.evaluate("""[...document.querySelectorAll('#sites tbody tr')].map((tr) =>
            [...tr.cells].map((td) => td.textContent))""")
        head = b.evaluate("[...document.querySelectorAll('#sites th')].map((th) => "
                          "th.textContent)")
        if head[:4] != ["site", "A", "B", "change"] or len(rows) < 5:
            fail(f"diff table: {head} {rows[:3]}")
        want = [{site_label(g["key"]): g["value"] for g in t["groups"]} for t in tops]
        checked = 0
        for r in rows[:20]:
            for side, col in ((0, 1), (1, 2)):
                v = want[side].get(r[0], 0)
                shown = parse_number(r[col])
                if abs(shown - v) > resolution(r[col]) * 1.0001 + 1:
                    fail(f"diff row {r}: {'AB'[side]} shows {shown}, top says {v}")
            checked += 1
        # The same order (largest change first) and the same "~" marks as `memtap diff`.
        diff = json.loads(run([memtap, "diff", "--json", a, b_trace]))
        noisy = {site_label(r["key"]): r["within_noise"] for r in diff["rows"]}
        order = [site_label(r["key"]) for r in diff["rows"][:20]]
        if [r[0] for r in rows[:20]] != order:
            fail(f"diff order {[r[0] for r in rows[:5]]}, `memtap diff` {order[:5]}")
        marks = [(r[0], r[3].startswith("~")) for r in rows[:20]]
        if any(noisy[name] != mark for name, mark in marks):
            fail(f"diff noise marks {marks[:8]} differ from `memtap diff`'s within_noise")
        if every_sample and any(mark for _, mark in marks):
            fail(f"--full traces, yet changes marked as sampling noise: {marks[:8]}")
        sel = b.evaluate("document.getElementById('selection').textContent")
        if "A:" not in sel or "change" not in sel:
            fail(f"diff summary {sel!r}")
        problems = b.problems()
        if problems:
            fail("the page logged:\n" + "\n".join(problems))
        print(f"ok: diff page: {checked} site rows match top of A and of B; {sel!r}")
    finally:
        b.close()


def check_objects(memtap, trace, tmp):
    html = make_report(memtap, trace, tmp)
    top = json.loads(run([memtap, "top", "--json", "-n", "0", trace]))
    want = {site_label(g["key"]): g["allocated"]["objects_estimated"] for g in top["groups"]}
    b = Browser(tmp)
    try:
        b.open("file://" + html)
        head = b.evaluate("[...document.querySelectorAll('#sites th')].map((th) => "
                          "th.textContent)")
        rows = b.evaluate("""[...document.querySelectorAll('#sites tbody tr')].map((tr) =>
            [...tr.cells].map((td) => td.textContent))""")
        problems = b.problems()
        if problems:
            fail("the page logged:\n" + "\n".join(problems))
    finally:
        b.close()
    if "objects" not in head or len(rows) < 5:
        fail(f"sites table: {head}, {len(rows)} rows")
    col = head.index("objects")
    exact = 0
    for r in rows:
        shown, v = parse_number(r[col].lstrip("~")), want.get(r[0])
        if v is None:
            fail(f"site {r[0]} is on the page but not in `memtap top`")
        if abs(shown - v) > (resolution(r[col].lstrip("~")) * 1.0001 if "." in r[col] else 0):
            fail(f"site {r[0]}: the page shows {r[col]} objects, `memtap top` {v}")
        exact += "." not in r[col]
    print(f"ok: {len(rows)} sites' estimated objects equal `memtap top`'s ({exact} to the unit)")


def record_full_pair(memtap, tmp):
    """Two --full traces of awk filling arrays of 2000 and 3000 strings."""
    traces = []
    for n in (2000, 3000):
        trace = os.path.join(tmp, f"awk{n}.ctf")
        program = f"BEGIN {{ for (i = 0; i < {n}; i++) a[i] = \"item \" i }}"
        run([memtap, "record", "--full", "-o", trace, "--", "awk", program])
        traces.append(trace)
    return traces


def main():
    modes = {"mass": 1, "range": 1, "page": 1, "objects": 1, "diff": 2, "diff-full": 0}
    if len(sys.argv) < 3 or sys.argv[1] not in modes or len(sys.argv) != 3 + modes[sys.argv[1]]:
        sys.exit(__doc__)
    mode, memtap, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    need_files(traces)
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "diff-full":
            a, b = record_full_pair(memtap, tmp)
            check_diff(memtap, a, b, tmp, every_sample=True)
        elif mode == "mass":
            check_mass(memtap, traces[0], tmp)
        elif mode == "range":
            check_range(memtap, traces[0], tmp)
        elif mode == "page":
            check_page(memtap, traces[0], tmp)
        elif mode == "objects":
            check_objects(memtap, traces[0], tmp)
        else:
            check_diff(memtap, traces[0], traces[1], tmp)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
