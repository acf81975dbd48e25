#!/usr/bin/env python3
"""Checks memtap's exports with the tools users open them in (stdlib only).

  check_exports.py pprof MEMTAP TRACE...   go tool pprof reads the profile; its totals per sample
                                           type equal `memtap summary --json`'s exactly; the
                                           mapping is marked [FN][FL][LN][IN]; the first TRACE
                                           has inlined frames: a location with several lines
  check_exports.py report MEMTAP TRACE     headless chromium loads the HTML report: no console
                                           message, the chart and the flame graph render, and
                                           filters given in the URL change the table; then,
                                           driven over the DevTools protocol, each range filter
                                           typed into the form and applied with the Apply button
                                           makes the table show exactly the cells it selects

A missing tool skips the test (exit 77) unless CI=true, where it fails."""
import fcntl
import json
import math
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

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


class DevTools:
    """Chromium driven over the DevTools protocol on --remote-debugging-pipe: commands go in on the
    browser's fd 3, replies and events come out of its fd 4, each a JSON message ended by a NUL."""

    def __init__(self, chromium, tmp):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():  # the pipe ends become the child's fds 3 and 4 (whatever numbers they had)
            r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--user-data-dir=" + tempfile.mkdtemp(dir=tmp),
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer, self.next_id, self.events, self.session = b"", 0, [], None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                sys.exit("FAIL: chromium did not answer over the DevTools pipe in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                sys.exit("FAIL: chromium closed the DevTools pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method, session=True, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            m = self.receive(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    sys.exit(f"FAIL: DevTools {method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method):
        deadline = time.monotonic() + 60
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self.receive(deadline))

    def problems(self):
        """Console messages, uncaught exceptions and logged errors so far."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled":
                out.append(f"console.{p['type']}: " +
                           " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append("exception: " + d.get("exception", {}).get("description", d["text"]))
            elif m.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append("log: " + p["entry"]["text"])
        return out

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            sys.exit(f"FAIL: evaluating {expression!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, selector):
        """A real mouse click (pressed, released) at the middle of the element."""
        x, y = self.evaluate(f"""(() => {{
            const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}});
            const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def type_into(self, element_id, text):
        """Focuses the input, selects what it holds and types `text` over it."""
        self.evaluate(f"""(() => {{ const e = document.getElementById({json.dumps(element_id)});
            e.focus(); e.select(); }})()""")
        self.call("Input.insertText", text=text)


def report_data(html):
    with open(html, encoding="utf-8") as f:
        text = f.read()
    start = text.index('<script id="memtap-data" type="application/json">')
    start = text.index(">", start) + 1
    return json.loads(text[start:text.index("</script>", start)])


def cell_passes(data, cell, f):
    """report.js's cellPasses for the range filters: which cells a filter keeps."""
    S, C, NEVER, BEFORE = data["summary"], data["cells"], 255, 255
    _, ab, fb, sc, lc = cell[:5]
    get = lambda k: f.get(k)
    if get("alloc_from") is not None or get("alloc_to") is not None:
        if ab == BEFORE:
            return False
        t0 = S["from_us"] + ab * C["width"]
        t1 = t0 + C["width"]
        if get("alloc_from") is not None and t1 <= get("alloc_from") * 1e6:
            return False
        if get("alloc_to") is not None and t0 > get("alloc_to") * 1e6:
            return False
    if get("live_from") is not None or get("live_to") is not None:
        lo = get("live_from") if get("live_from") is not None else get("live_to")
        hi = get("live_to") if get("live_to") is not None else get("live_from")
        b0 = math.floor((lo * 1e6 - S["from_us"]) / C["width"])
        b1 = math.floor((hi * 1e6 - S["from_us"]) / C["width"])
        if ab != BEFORE and ab > b1:
            return False
        if fb != NEVER and fb <= b0:
            return False
    limits = data["size_limits"]
    size, below = limits[sc], (limits[sc - 1] if sc > 0 else 0)
    if get("size_min") is not None and size is not None and size < get("size_min"):
        return False
    if get("size_max") is not None and below >= get("size_max"):
        return False
    lives = data["lifetime_limits"]
    if get("life_min") is not None or get("life_max") is not None:
        hi, lo = lives[lc], (lives[lc - 1] if lc > 0 else 0)
        if get("life_min") is not None and hi is not None and hi < get("life_min") * 1e6:
            return False
        if get("life_max") is not None and (lc == len(lives) - 1 or lo >= get("life_max") * 1e6):
            return False
    return True


FORM = {"alloc_from": "f-alloc-from", "alloc_to": "f-alloc-to", "live_from": "f-live-from",
        "live_to": "f-live-to", "size_min": "f-size-min", "size_max": "f-size-max",
        "life_min": "f-life-min", "life_max": "f-life-max"}

STATE = """(() => ({rows: document.body.dataset.tableRows, top: document.body.dataset.tableTop,
    ready: document.body.dataset.ready, status: document.getElementById("status").textContent,
    table: document.querySelector("#sites tbody").innerText,
    chart: document.getElementById("chart-filtered").getAttribute("points")}))()"""


def check_form_filters(chromium, html, tmp):
    """Types each range filter into the form, clicks Apply, and checks that the table then shows
    exactly the cells the filter selects (report.js's rule, computed here from the data), fewer
    than all, and that nothing was logged."""
    data = report_data(html)
    total = len(data["cells"]["rows"])
    duration = data["summary"]["duration_us"] / 1e6
    filters = [{"alloc_from": round(duration * 0.2, 4), "alloc_to": round(duration * 0.4, 4)},
               {"live_from": round(duration * 0.93, 4), "live_to": round(duration * 0.97, 4)},
               {"life_min": 0.001, "life_max": 0.01},
               {"size_max": 64}]
    browser = DevTools(chromium, tmp)
    try:
        browser.call("Page.navigate", url="file://" + html)
        browser.wait_event("Page.loadEventFired")
        whole = browser.evaluate(STATE)
        if whole["ready"] != "1" or f"{total} of {total} cells match" not in whole["status"]:
            sys.exit(f"FAIL: the report did not render over DevTools: {whole}")
        for f in filters:
            browser.click("#f-reset")
            for key, value in f.items():
                browser.type_into(FORM[key], str(value))
            browser.click("#f-apply")
            state = browser.evaluate(STATE)
            want = sum(cell_passes(data, c, f) for c in data["cells"]["rows"])
            problems = browser.problems()
            if problems:
                sys.exit(f"FAIL: form filter {f}: the page logged:\n" + "\n".join(problems))
            if not 0 < want < total:
                sys.exit(f"FAIL: form filter {f} selects {want} of {total} cells: a bad test")
            if f" {want} of {total} cells match" not in state["status"]:
                sys.exit(f"FAIL: form filter {f}: status {state['status']!r}, want {want} cells")
            if state["table"] == whole["table"] or state["chart"] == whole["chart"]:
                sys.exit(f"FAIL: form filter {f} did not change the table and the chart")
            print(f"ok: form {f}: {state['status']}, top {state['top']!r}")
    finally:
        browser.close()


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
    check_form_filters(chromium, html, tmp)


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
