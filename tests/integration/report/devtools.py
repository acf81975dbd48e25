"""Headless Chromium driven over the DevTools protocol (stdlib only), for the report's tests and
its timing benchmark (bench/analysis/report_timing.py).

Chromium runs with --remote-debugging-pipe: commands go in on its fd 3, replies and events come
out of its fd 4, each a JSON message ended by a NUL, so no websocket is needed. The viewport is
fixed (1280 x 800 unless told) and waits are on flags the page sets on <body data-...>, observed
with a MutationObserver, never on sleeps."""
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
from toolcheck import SKIP, need  # noqa: E402,F401 (SKIP: for the scripts that import this)


class Browser:
    def __init__(self, tmp, width=1280, height=800):
        chromium = need("chromium", "chromium")
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
             f"--window-size={width},{height}", "--remote-debugging-pipe", "about:blank"],
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
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

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
        deadline = time.monotonic() + 120
        while True:
            m = self.receive(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    sys.exit(f"FAIL: DevTools {method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method):
        deadline = time.monotonic() + 120
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
            elif m.get("method") == "Log.entryAdded" and p["entry"]["level"] in ("error",
                                                                                 "warning"):
                out.append("log: " + p["entry"]["text"])
        return out

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            sys.exit(f"FAIL: evaluating {expression[:200]!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, url):
        """Loads the page and waits until its script says it has drawn everything. (A page
        differing only in its fragment from the one shown would not load again: the blank page
        comes first.)"""
        self.call("Page.navigate", url="about:blank")
        self.wait_event("Page.loadEventFired")
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        self.wait_flag("ready", "1")

    def wait_flag(self, name, value):
        """Waits until <body data-NAME> is `value` (a MutationObserver, no polling)."""
        self.evaluate(f"""new Promise((resolve, reject) => {{
            const ok = () => document.body.dataset[{json.dumps(name)}] === {json.dumps(value)};
            if (ok()) return resolve(true);
            const mo = new MutationObserver(() => {{ if (ok()) {{ mo.disconnect(); resolve(true); }} }});
            mo.observe(document.body, {{attributes: true}});
            setTimeout(() => reject(new Error("no data-{name}={value} within 60 s")), 60000);
        }})""")

    def applied(self):
        return int(self.evaluate("document.body.dataset.applied || '0'"))

    def after(self, action):
        """Runs `action` (which makes the page redraw) and waits for the redraw."""
        n = self.applied()
        action()
        self.wait_flag("applied", str(n + 1))

    def center(self, selector):
        return self.evaluate(f"""(() => {{
            const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}});
            const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")

    def click(self, selector):
        """A real mouse click (pressed, released) at the middle of the element."""
        x, y = self.center(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def drag(self, x0, y0, x1, y1):
        """Mouse pressed at (x0, y0), moved in steps to (x1, y1), released there."""
        self.call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y0, button="left",
                  clickCount=1)
        for k in range(1, 6):
            self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + (x1 - x0) * k / 5,
                      y=y0 + (y1 - y0) * k / 5, button="left")
        self.call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y1, button="left",
                  clickCount=1)

    def type_into(self, element_id, text, enter=False):
        """Focuses the input, selects what it holds, types `text` over it (and presses Enter)."""
        self.evaluate(f"""(() => {{ const e = document.getElementById({json.dumps(element_id)});
            e.focus(); e.select(); }})()""")
        self.call("Input.insertText", text=text)
        if enter:
            for kind in ("rawKeyDown", "keyUp"):
                self.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                          windowsVirtualKeyCode=13, nativeVirtualKeyCode=13)
