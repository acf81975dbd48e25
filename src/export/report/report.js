// memtap report: renders the data embedded by src/export/html.c (no libraries, no network).
// Each trace's rows are (stack, allocation step, free step, size class, lifetime class) ->
// sampled objects, samples, estimated objects; stacks are (trie node, site). The filters pick rows,
// and everything on the page (summary line, charts, flame graph, tables, callers) is drawn from
// the picked rows. Time steps are data.cells.width µs from summary.from_us: a time range snaps to
// them. With two traces (memtap report A --diff B) the page compares B with A.
"use strict";
(function () {
  performance.mark("memtap-start");
  const DATA = JSON.parse(document.getElementById("memtap-data").textContent);
  performance.mark("memtap-parsed");
  const NEVER = 255, BEFORE = 255;
  const $ = (id) => document.getElementById(id);
  const SVGNS = "http://www.w3.org/2000/svg";
  const DIFF = DATA.traces.length === 2;
  const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                  "#ff9da7", "#9c755f"];

  // --- formatting -----------------------------------------------------------------------------
  // v >= 0 to a whole number as C's printf("%.0f") does: a tie goes to the even neighbour
  // (toFixed would take the larger). A tie to one decimal cannot be exact in binary: toFixed(1)
  // already agrees with printf there.
  function fixed0(v) {
    const f = Math.floor(v), d = v - f;
    return String(d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f);
  }
  function fmtBytes(b) { // IEC units, exactly as the command line prints them (out_format_bytes)
    const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let i = 0, v = Math.abs(b);
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    const s = i === 0 || v >= 99.95 ? fixed0(v) : v.toFixed(1);
    return (b < 0 && s !== "0" ? "-" : "") + s + " " + u[i];
  }
  function fmtCount(n) {
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(2) + " G";
    if (a >= 1e6) return (n / 1e6).toFixed(2) + " M";
    if (a >= 1e4) return (n / 1e3).toFixed(1) + " k";
    return Math.round(n).toLocaleString("en-US");
  }
  function fmtSec(us) {
    if (Math.abs(us) < 10000 && us !== 0) return fmtDur(Math.abs(us)).replace(/^/, us < 0 ? "-" : "");
    const s = us / 1e6;
    return (Math.abs(s) >= 100 ? s.toFixed(1) : Math.abs(s) >= 1 ? s.toFixed(3) : s.toFixed(4)) +
           " s";
  }
  function fmtDur(us) {
    if (us < 1000) return us.toFixed(0) + " µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + " ms";
    return (us / 1e6).toFixed(2) + " s";
  }
  const pct = (x, total) => total > 0 ? (100 * x / total).toFixed(x / total < 0.1 ? 2 : 1) + "%"
                                      : "–";
  const secText = (us) => (us / 1e6).toFixed(6);
  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4))
                                     : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const esc = (t) => t.replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                                                    '"': "&quot;"})[c]);
  function hashColor(name) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return "hsl(" + (h % 45 + 5) + "," + (60 + h % 30) + "%," + (58 + (h >> 8) % 18) + "%)";
  }

  // --- the model: functions and a trie of function names shared by the traces ---------------
  const fnIds = new Map(), fnNames = [];
  function fnId(name) {
    let id = fnIds.get(name);
    if (id === undefined) { id = fnNames.length; fnIds.set(name, id); fnNames.push(name); }
    return id;
  }
  // Name trie: node 0 is the root ("all"); children are keyed by (parent, function) in an
  // open-addressing hash table (hundreds of thousands of nodes: a Map of numbers is slower).
  let nParent = new Int32Array(1 << 16), nFn = new Int32Array(1 << 16), nCount = 1;
  nParent[0] = -1; nFn[0] = -1;
  let slots = new Int32Array(1 << 17).fill(-1);
  const slotOf = (parent, fn, mask) => {
    let h = (Math.imul(parent, 0x9e3779b1) ^ Math.imul(fn + 1, 0x85ebca77)) >>> 0;
    h = (h ^ (h >>> 15)) & mask;
    while (slots[h] >= 0 && (nParent[slots[h]] !== parent || nFn[slots[h]] !== fn))
      h = (h + 1) & mask;
    return h;
  };
  function nameChild(parent, fn) {
    let h = slotOf(parent, fn, slots.length - 1);
    if (slots[h] >= 0) return slots[h];
    if (nCount === nParent.length) {
      const p = new Int32Array(nCount * 2), f = new Int32Array(nCount * 2);
      p.set(nParent); f.set(nFn); nParent = p; nFn = f;
    }
    if (2 * nCount >= slots.length) {
      slots = new Int32Array(slots.length * 2).fill(-1);
      for (let i = 1; i < nCount; i++) slots[slotOf(nParent[i], nFn[i], slots.length - 1)] = i;
      h = slotOf(parent, fn, slots.length - 1);
    }
    nParent[nCount] = parent; nFn[nCount] = fn; slots[h] = nCount;
    return nCount++;
  }
  const siteIds = new Map(), siteNames = [];
  function siteId(label) {
    let id = siteIds.get(label);
    if (id === undefined) { id = siteNames.length; siteIds.set(label, id); siteNames.push(label); }
    return id;
  }
  const PRUNED = "(smaller callees)";
  const NO_BT = "<no backtrace>";

  function prepare(ds) {
    const S = ds.summary, C = ds.cells;
    const frameFn = ds.frames.map((f) => fnId(f[0]));
    // "function file:line"; a frame without a line (a stripped native library) names its module
    const frameLabel = (f) => {
      const fr = ds.frames[f];
      return fr[1] ? fr[0] + " " + fr[1] + (fr[2] > 0 ? ":" + fr[2] : "") : fr[0];
    };
    const nn = ds.nodes.length / 2;
    const nodeName = new Int32Array(nn);
    for (let i = 0; i < nn; i++) {
      const parent = i - ds.nodes[2 * i];
      nodeName[i] = nameChild(parent < 0 ? 0 : nodeName[parent], frameFn[ds.nodes[2 * i + 1]]);
    }
    const ns = ds.stacks.length / 2;
    const stackName = new Int32Array(ns), stackSite = new Int32Array(ns);
    const stackNode = new Int32Array(ns);
    const frameSite = new Int32Array(ds.frames.length).fill(-1);
    const noSite = siteId(NO_BT);
    for (let s = 0; s < ns; s++) {
      const node = ds.stacks[2 * s], site = ds.stacks[2 * s + 1];
      stackNode[s] = node;
      stackName[s] = node < 0 ? nameChild(0, fnId(NO_BT)) : nodeName[node];
      if (site >= 0 && frameSite[site] < 0) frameSite[site] = siteId(frameLabel(site));
      stackSite[s] = site < 0 ? noSite : frameSite[site];
    }
    const R = C.rows, nr = R.length / 8;
    const rows = {n: nr, stack: new Int32Array(nr), ab: new Uint8Array(nr), fb: new Uint8Array(nr),
                  sc: new Uint8Array(nr), lc: new Uint8Array(nr), obj: new Float64Array(nr),
                  bytes: new Float64Array(nr), est: new Float64Array(nr)};
    for (let i = 0, j = 0; i < nr; i++, j += 8) {
      rows.stack[i] = R[j]; rows.ab[i] = R[j + 1]; rows.fb[i] = R[j + 2]; rows.sc[i] = R[j + 3];
      rows.lc[i] = R[j + 4]; rows.obj[i] = R[j + 5]; rows.bytes[i] = R[j + 6] * S.bytes_per_sample;
      rows.est[i] = R[j + 7];
    }
    return {ds, S, C, bps: S.bytes_per_sample, stackName, stackSite, stackNode, nodeName, rows,
            fnCache: new Map(), prunedFrame: ds.pruned_frame};
  }
  const T = DATA.traces.map(prepare);
  const CUR = T[T.length - 1]; // the trace shown (B in a comparison)
  const nNames = nCount;
  slots = null;
  // Children of each name node, in creation order: kidList[kidStart[n] .. kidStart[n + 1]).
  const kidStart = new Int32Array(nNames + 1), kidList = new Int32Array(Math.max(0, nNames - 1));
  for (let n = 1; n < nNames; n++) kidStart[nParent[n] + 1]++;
  for (let n = 0; n < nNames; n++) kidStart[n + 1] += kidStart[n];
  {
    const fill = kidStart.slice(0, nNames);
    for (let n = 1; n < nNames; n++) kidList[fill[nParent[n]]++] = n;
  }
  const kids = (n) => kidList.subarray(kidStart[n], kidStart[n + 1]);
  // outer[n]: no caller of n is n's function (a walk of the tree with a count per function).
  const outer = new Uint8Array(nNames);
  {
    const active = new Int32Array(fnNames.length), path = new Int32Array(nNames + 1);
    const next = new Int32Array(nNames + 1);
    let sp = 0;
    path[0] = 0; next[0] = kidStart[0];
    while (sp >= 0) {
      const n = path[sp];
      if (next[sp] < kidStart[n + 1]) {
        const c = kidList[next[sp]++], f = nFn[c];
        outer[c] = active[f] === 0 ? 1 : 0;
        active[f]++;
        path[++sp] = c; next[sp] = kidStart[c];
      } else {
        if (n > 0) active[nFn[n]]--;
        sp--;
      }
    }
  }
  performance.mark("memtap-prepared");

  // --- filters and the URL ---------------------------------------------------------------------
  const F = {show: "alloc", from: null, to: null, sizeMin: null, sizeMax: null, lifeMin: null,
             lifeMax: null, fn: "", notFn: "", search: "", up: false, zoom: null, fnPanel: null};
  const FORM = [["f-from", "from"], ["f-to", "to"], ["f-size-min", "sizeMin"],
                ["f-size-max", "sizeMax"], ["f-life-min", "lifeMin"], ["f-life-max", "lifeMax"]];
  const URLKEYS = {show: "show", from: "from", to: "to", sizeMin: "size_min", sizeMax: "size_max",
                   lifeMin: "life_min", lifeMax: "life_max", fn: "fn", notFn: "notfn",
                   search: "find", up: "flame", fnPanel: "function"};
  function readForm() {
    const num = (id) => { const v = $(id).value.trim().replace(/\s*s$/, "");
                          return v === "" || isNaN(Number(v)) ? null : Number(v); };
    F.show = $("f-show").value;
    for (const [id, k] of FORM) F[k] = num(id);
    F.fn = $("f-fn").value.trim();
    F.notFn = $("f-notfn").value.trim();
  }
  function writeForm() {
    $("f-show").value = F.show;
    for (const [id, k] of FORM) $(id).value = F[k] === null ? "" : String(F[k]);
    $("f-fn").value = F.fn; $("f-notfn").value = F.notFn;
    $("flame-search").value = F.search; $("flame-up").checked = F.up;
  }
  function toHash() {
    const p = new URLSearchParams();
    for (const k in URLKEYS) {
      const v = F[k];
      if (v === null || v === "" || v === false || (k === "show" && v === "alloc")) continue;
      p.set(URLKEYS[k], k === "up" ? "up" : String(v));
    }
    const h = p.toString();
    if (location.hash.slice(1) !== h)
      history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }
  function fromHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    for (const k in URLKEYS) {
      if (!p.has(URLKEYS[k])) continue;
      const v = p.get(URLKEYS[k]);
      if (k === "up") F.up = v === "up";
      else if (typeof F[k] === "string" || k === "fnPanel") F[k] = v;
      else F[k] = v === "" || isNaN(Number(v)) ? null : Number(v);
    }
    if (F.show !== "live") F.show = "alloc";
  }

  // The time range snapped to a trace's steps: [b0, b1) and the µs it covers.
  function snapped(t) {
    const S = t.S, C = t.C, nb = C.buckets;
    let b0 = 0, b1 = nb;
    if (F.from !== null) b0 = Math.max(0, Math.min(nb - 1, Math.floor((F.from * 1e6 - S.from_us) /
                                                                      C.width + 1e-9)));
    if (F.to !== null) b1 = Math.max(b0 + 1, Math.min(nb, Math.ceil((F.to * 1e6 - S.from_us) /
                                                                    C.width - 1e-9)));
    const whole = b0 === 0 && b1 === nb;
    return {b0, b1, whole, from: S.from_us + b0 * C.width,
            to: Math.min(S.to_us, S.from_us + b1 * C.width), toEnd: b1 === nb};
  }
  // Whether a stack's backtrace has a function whose name contains `needle` (cached per trace).
  function stackHas(t, needle) {
    let m = t.fnCache.get(needle);
    if (m) return m;
    const nn = t.nodeName.length, low = needle.toLowerCase();
    const fnHit = new Uint8Array(fnNames.length);
    for (let f = 0; f < fnNames.length; f++) fnHit[f] = fnNames[f].toLowerCase().includes(low);
    const nodeHit = new Uint8Array(nn), ds = t.ds;
    for (let i = 0; i < nn; i++) {
      const parent = i - ds.nodes[2 * i];
      nodeHit[i] = (parent >= 0 && nodeHit[parent]) || fnHit[nFn[t.nodeName[i]]];
    }
    m = new Uint8Array(t.stackNode.length);
    for (let s = 0; s < m.length; s++) m[s] = t.stackNode[s] >= 0 && nodeHit[t.stackNode[s]];
    t.fnCache.set(needle, m);
    return m;
  }
  // Which rows pass the filters other than time, as a mask.
  function baseMask(t) {
    const r = t.rows, ds = t.ds, mask = new Uint8Array(r.n);
    const sl = ds.size_limits, ll = ds.lifetime_limits, notFreed = ll.length - 1;
    const sizeOk = sl.map((hi, c) => {
      const lo = c > 0 ? sl[c - 1] : 0;
      return !(F.sizeMin !== null && hi !== null && hi < F.sizeMin) &&
             !(F.sizeMax !== null && lo >= F.sizeMax);
    });
    const lifeOk = ll.map((hi, c) => {
      if (F.lifeMin === null && F.lifeMax === null) return true;
      if (c === notFreed) return F.lifeMax === null;
      const lo = c > 0 ? ll[c - 1] : 0;
      return !(F.lifeMin !== null && hi !== null && hi < F.lifeMin * 1e6) &&
             !(F.lifeMax !== null && lo >= F.lifeMax * 1e6);
    });
    const has = F.fn ? stackHas(t, F.fn) : null, hasNot = F.notFn ? stackHas(t, F.notFn) : null;
    for (let i = 0; i < r.n; i++) {
      const s = r.stack[i];
      mask[i] = sizeOk[r.sc[i]] && lifeOk[r.lc[i]] && (!has || has[s]) && (!hasNot || !hasNot[s]);
    }
    return mask;
  }
  // Whether row i counts for the time range: allocated in it, or live at its end.
  function timeTest(t, snap) {
    const r = t.rows, b0 = snap.b0, b1 = snap.b1;
    if (F.show === "live")
      return (i) => (r.ab[i] === BEFORE || r.ab[i] < b1) && (r.fb[i] === NEVER || r.fb[i] >= b1);
    return (i) => r.ab[i] !== BEFORE && r.ab[i] >= b0 && r.ab[i] < b1;
  }

  // --- computing one view ----------------------------------------------------------------------
  function compute(t) {
    const snap = snapped(t), mask = baseMask(t), inTime = timeTest(t, snap), r = t.rows;
    const ns = t.stackName.length, nb = t.C.buckets;
    const stackBytes = new Float64Array(ns);
    const v = {snap, bytes: 0, objects: 0, est: 0, stillLive: 0, mask};
    const sites = new Map();
    const sizes = new Float64Array(t.ds.size_limits.length);
    const lifes = new Float64Array(t.ds.lifetime_limits.length);
    const rate = new Float64Array(nb), count = new Float64Array(nb);
    for (let i = 0; i < r.n; i++) {
      if (!mask[i]) continue;
      if (r.ab[i] !== BEFORE) { rate[r.ab[i]] += r.bytes[i]; count[r.ab[i]] += r.est[i]; }
      if (!inTime(i)) continue;
      const b = r.bytes[i], s = r.stack[i];
      stackBytes[s] += b;
      v.bytes += b; v.objects += r.obj[i]; v.est += r.est[i];
      const live = r.fb[i] === NEVER || r.fb[i] >= snap.b1;
      if (live) v.stillLive += b;
      sizes[r.sc[i]] += b; lifes[r.lc[i]] += b;
      const site = t.stackSite[s];
      let e = sites.get(site);
      if (!e) { e = {site, bytes: 0, obj: 0, est: 0, live: 0, stacks: 0}; sites.set(site, e); }
      e.bytes += b; e.obj += r.obj[i]; e.est += r.est[i]; if (live) e.live += b;
    }
    // Names: self, then inclusive (children come after their parent in the name trie).
    const self = new Float64Array(nNames), incl = new Float64Array(nNames);
    for (let s = 0; s < ns; s++) self[t.stackName[s]] += stackBytes[s];
    incl.set(self);
    for (let n = nNames - 1; n > 0; n--) incl[nParent[n]] += incl[n];
    v.self = self; v.incl = incl; v.sites = sites; v.sizes = sizes; v.lifes = lifes;
    v.rate = rate; v.count = count;
    return v;
  }
  // Inclusive and exclusive bytes per function; a function counts once per stack (its outermost
  // occurrence), so recursion does not count twice.
  function functionTotals(v) {
    const inc = new Float64Array(fnNames.length), exc = new Float64Array(fnNames.length);
    for (let n = 1; n < nNames; n++) {
      if (outer[n]) inc[nFn[n]] += v.incl[n];
      exc[nFn[n]] += v.self[n];
    }
    return {inc, exc};
  }

  // --- the summary line ------------------------------------------------------------------------
  function renderOverview() {
    const parts = T.map((t, k) => {
      const S = t.S;
      return (DIFF ? (k ? "B: " : "A: ") + S.executable + ", " : "") + fmtSec(S.duration_us) +
             ", " + fmtBytes(S.allocated.samples * t.bps) + " allocated in " +
             (S.sample_rate === 1 ? "" : "~") + fmtCount(S.allocated.objects_estimated) +
             " objects, peak " +
             fmtBytes(S.peak.samples * t.bps) + " at " + fmtSec(S.peak_time_us) + ", " +
             fmtBytes(S.live_end.samples * t.bps) + " never freed; one sample stands for " +
             fmtBytes(t.bps) + " (rate " + S.sample_rate + ")";
    });
    $("overview").textContent = parts.join(" · ");
  }
  function renderSelection(views) {
    const box = $("selection");
    box.textContent = "";
    const v = views[views.length - 1], t = CUR, snap = v.snap, S = t.S;
    const what = F.show === "live" ? "still live at " + (snap.toEnd ? "the end" : fmtSec(snap.to))
                                   : "allocated";
    const range = snap.whole ? "over the whole trace"
                             : "from " + fmtSec(snap.from) + " to " + fmtSec(snap.to);
    const total = F.show === "live" ? S.live_end.samples * t.bps : S.allocated.samples * t.bps;
    // Every allocation recorded (rate 1): the objects are counted, not estimated.
    const counted = S.sample_rate === 1;
    let text = fmtBytes(v.bytes) + " " + what + (F.show === "live" ? "" : " " + range) +
               (counted ? " in " + fmtCount(v.objects) + " objects"
                        : " in ~" + fmtCount(v.est) + " objects (" + v.objects + " sampled)");
    if (F.show === "alloc") text += ", " + fmtBytes(v.stillLive) + " of it still live at " +
                                    (snap.toEnd ? "the end" : "the range's end");
    if (snap.whole && F.show === "alloc" || F.show === "live" && snap.toEnd)
      text += " — " + pct(v.bytes, total) + " of all the bytes " +
              (F.show === "live" ? "live at the end" : "allocated");
    const filters = [];
    if (F.sizeMin !== null || F.sizeMax !== null)
      filters.push("size " + (F.sizeMin ?? 0) + "–" + (F.sizeMax ?? "∞") + " B");
    if (F.lifeMin !== null || F.lifeMax !== null)
      filters.push("lifetime " + (F.lifeMin ?? 0) + "–" + (F.lifeMax ?? "∞") + " s");
    if (F.fn) filters.push("backtrace has “" + F.fn + "”");
    if (F.notFn) filters.push("backtrace lacks “" + F.notFn + "”");
    if (filters.length) text += " (" + filters.join(", ") + ")";
    if (DIFF) {
      const a = views[0];
      text = "B: " + text + " · A: " + fmtBytes(a.bytes) + " · change " +
             (v.bytes >= a.bytes ? "+" : "") + fmtBytes(v.bytes - a.bytes);
    }
    box.append(document.createTextNode(text));
    if (!snap.whole) {
      const steps = " (snapped to the report's " + fmtDur(t.C.width) + " steps)";
      box.append(document.createTextNode(steps));
    }
    // The same numbers on the command line: [from, to) is --from from --to (to − 1 µs).
    const args = [];
    if (snap.b0 > 0 || S.from_us > 0) args.push("--from " + secText(snap.from));
    if (!snap.toEnd) args.push("--to " + secText(S.from_us + snap.b1 * t.C.width - 1));
    const cli = filters.length ? "(the command line has no size, lifetime or function filters)"
                               : "memtap top" + (F.show === "live" ? " --by live" : "") +
                                 (args.length ? " " + args.join(" ") : "") + " TRACE";
    if (!DIFF)
      box.append(el("span", {class: "cli", id: "cli", title: "The same numbers on the command line"},
                    cli));
    document.body.dataset.selFrom = String(snap.from);
    document.body.dataset.selTo = String(snap.to);
    document.body.dataset.selBytes = String(Math.round(v.bytes));
  }

  // --- charts ----------------------------------------------------------------------------------
  // Widths are read once per redraw, before anything changes (each read after a change would lay
  // the whole page out again).
  let widths = {};
  const width = (id) => widths[id];
  function measure() {
    widths = {};
    for (const id of ["heap", "flame", "rate", "count", "sizes", "lifetimes"])
      widths[id] = Math.max(300, $(id).parentNode.clientWidth - 2);
  }
  function axes(svg, W, H, L, B, xmax, ymax, fmtY, xLabel) {
    svg.append(el("svg:line", {x1: L, y1: H - B, x2: W - 6, y2: H - B, stroke: "#999"}));
    svg.append(el("svg:line", {x1: L, y1: 6, x2: L, y2: H - B, stroke: "#999"}));
    for (let i = 0; i <= 3; i++) {
      const y = H - B - (H - B - 10) * i / 3;
      svg.append(el("svg:text", {x: L - 4, y: y + 3, "text-anchor": "end"}, fmtY(ymax * i / 3)));
      if (i) svg.append(el("svg:line", {x1: L, y1: y, x2: W - 6, y2: y, stroke: "#f0f0f0"}));
    }
    const ticks = Math.max(1, Math.min(5, Math.floor((W - L) / 90)));
    if (xLabel) for (let i = 0; i <= ticks; i++) {
      const x = L + (W - L - 6) * i / ticks;
      svg.append(el("svg:text", {x, y: H - 4, "text-anchor": i ? (i === ticks ? "end" : "middle")
                                                               : "start"},
                    xLabel(startUs + xmax * i / ticks)));
    }
  }
  const spanUs = Math.max(1, ...T.map((t) => t.S.to_us - t.S.from_us));
  const startUs = Math.min(...T.map((t) => t.S.from_us));
  let heapGeom = null;

  // Live bytes at each step's end by site (rows passing the non-time filters), top sites first.
  function liveBySite(t, mask) {
    const r = t.rows, nb = t.C.buckets, per = new Map();
    const total = new Float64Array(nb);
    for (let i = 0; i < r.n; i++) {
      if (!mask[i]) continue;
      const lo = r.ab[i] === BEFORE ? 0 : r.ab[i], hi = r.fb[i] === NEVER ? nb : r.fb[i];
      if (lo >= hi) continue;
      const site = t.stackSite[r.stack[i]];
      let a = per.get(site);
      if (!a) { a = new Float64Array(nb + 1); per.set(site, a); }
      a[lo] += r.bytes[i]; a[hi] -= r.bytes[i];
    }
    const series = [];
    for (const [site, d] of per) {
      const a = new Float64Array(nb);
      let run = 0, max = 0;
      for (let b = 0; b < nb; b++) { run += d[b]; a[b] = run; total[b] += run; max = Math.max(max, run); }
      series.push({site, a, max});
    }
    series.sort((x, y) => y.max - x.max || x.site - y.site);
    return {series, total};
  }
  function renderHeap(views) {
    const svg = $("heap"), W = width("heap"), H = 130, L = 64, B = 18;
    svg.textContent = "";
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    const x = (us) => L + (W - L - 6) * (us - startUs) / spanUs;
    const t = CUR, C = t.C, nb = C.buckets;
    const stacked = liveBySite(t, views[views.length - 1].mask);
    const top = stacked.series.slice(0, 8);
    let ymax = 1;
    for (const tt of T) for (const val of tt.ds.timeline.live_max) ymax = Math.max(ymax, val);
    for (const val of stacked.total) ymax = Math.max(ymax, val);
    const y = (val) => H - B - (H - B - 10) * val / ymax;
    axes(svg, W, H, L, B, spanUs, ymax, fmtBytes, (us) => fmtSec(us));
    // Stacked areas: the top sites, then everything else matching the filters, per step.
    const edge = (b) => x(Math.min(t.S.to_us, t.S.from_us + b * C.width));
    const base = new Float64Array(nb);
    const layers = top.map((s) => s.a).concat([stacked.total.map((tot, b) =>
                       tot - top.reduce((acc, s) => acc + s.a[b], 0))]);
    layers.forEach((a, k) => {
      const upper = [], lower = [];
      for (let b = 0; b < nb; b++) {
        if (t.S.from_us + b * C.width > t.S.to_us) break;
        const y0 = y(base[b]), y1 = y(base[b] + a[b]);
        upper.push(edge(b) + "," + y1, edge(b + 1) + "," + y1);
        lower.push(edge(b + 1) + "," + y0, edge(b) + "," + y0);
        base[b] += a[b];
      }
      svg.append(el("svg:polygon", {points: upper.concat(lower.reverse()).join(" "),
                                    fill: k < top.length ? COLORS[k % COLORS.length] : "#bbb",
                                    "fill-opacity": 0.75, class: "area"}));
    });
    // The whole trace's live heap (largest in each of up to 1 024 steps), per trace.
    T.forEach((tt, k) => {
      const tl = tt.ds.timeline, pts = [];
      tl.live_max.forEach((val, i) => {
        const t0 = tt.S.from_us + i * tl.width, t1 = Math.min(tt.S.to_us, t0 + tl.width);
        pts.push(x(t0) + "," + y(val), x(t1) + "," + y(val));
      });
      svg.append(el("svg:polyline", {points: pts.join(" "), fill: "none",
                                     stroke: DIFF && k === 0 ? "#888" : "#c22", "stroke-width": 1.2,
                                     id: k === T.length - 1 ? "heap-total" : "heap-total-a"}));
    });
    const snap = views[views.length - 1].snap;
    if (!snap.whole)
      svg.append(el("svg:rect", {x: x(snap.from), y: 6, width: Math.max(1, x(snap.to) - x(snap.from)),
                                 height: H - B - 6, fill: "#36c", "fill-opacity": 0.15,
                                 stroke: "#36c", id: "heap-range"}));
    const legend = $("heap-legend");
    legend.textContent = "";
    const item = (color, text) => { legend.append(el("span", {class: "sw", style: "background:" +
                                                                  color}), text); };
    item("#c22", DIFF ? "B: live heap" : "live heap (largest in each step)");
    if (DIFF) item("#888", "A: live heap");
    top.forEach((s, k) => item(COLORS[k % COLORS.length], siteNames[s.site].split(" ")[0]));
    item("#bbb", "other sites");
    heapGeom = {W, H, L, B, x, top, stacked, y};
  }
  function heapTime(px) {
    const g = heapGeom;
    return startUs + spanUs * Math.max(0, Math.min(1, (px - g.L) / (g.W - g.L - 6)));
  }
  function setupHeapEvents() {
    const svg = $("heap"), tip = $("heap-tip");
    let dragFrom = null, band = null;
    const px = (e) => e.clientX - svg.getBoundingClientRect().left;
    svg.addEventListener("mousedown", (e) => {
      dragFrom = px(e);
      band = el("svg:rect", {x: dragFrom, y: 6, width: 0, height: heapGeom.H - heapGeom.B - 6,
                             fill: "#36c", "fill-opacity": 0.2, id: "heap-drag"});
      svg.append(band);
      e.preventDefault();
    });
    window.addEventListener("mousemove", (e) => {
      if (dragFrom !== null) {
        const p = px(e);
        band.setAttribute("x", Math.min(p, dragFrom));
        band.setAttribute("width", Math.abs(p - dragFrom));
      }
    });
    window.addEventListener("mouseup", (e) => {
      if (dragFrom === null) return;
      const p = px(e), a = Math.min(p, dragFrom), b = Math.max(p, dragFrom);
      dragFrom = null;
      if (b - a < 3) { F.from = F.to = null; }
      else { F.from = heapTime(a) / 1e6; F.to = heapTime(b) / 1e6; snapForm(); }
      writeForm();
      apply();
    });
    svg.addEventListener("mousemove", (e) => {
      const g = heapGeom, p = px(e), us = heapTime(p), t = CUR;
      if (p < g.L) { tip.hidden = true; return; }
      const b = Math.min(t.C.buckets - 1, Math.max(0, Math.floor((us - t.S.from_us) / t.C.width)));
      const tl = t.ds.timeline;
      const ti = Math.min(tl.live_max.length - 1, Math.max(0, Math.floor((us - t.S.from_us) /
                                                                          tl.width)));
      const lines = [fmtSec(us) + (DIFF ? " (B)" : ""),
                     "live heap: " + fmtBytes(tl.live_end[ti] || 0) + " (largest in step " +
                     fmtBytes(tl.live_max[ti] || 0) + ")",
                     "matching the filters at " + fmtSec(Math.min(t.S.to_us, t.S.from_us +
                                                                  (b + 1) * t.C.width)) + ": " +
                     fmtBytes(g.stacked.total[b] || 0)];
      g.top.forEach((s) => lines.push("  " + siteNames[s.site].split(" ")[0] + ": " +
                                      fmtBytes(s.a[b])));
      tip.textContent = lines.join("\n");
      tip.hidden = false;
      const box = svg.getBoundingClientRect();
      tip.style.left = Math.min(p + 12, box.width - 320) + "px";
      tip.style.top = "8px";
    });
    svg.addEventListener("mouseleave", () => { tip.hidden = true; });
  }
  // The time range as typed or dragged, written back snapped to the steps.
  function snapForm() {
    if (F.from === null && F.to === null) return;
    const s = snapped(CUR);
    F.from = s.b0 === 0 && CUR.S.from_us === 0 ? null : Number(secText(s.from));
    F.to = s.toEnd ? null : Number(secText(s.to));
  }
  function renderSeries(id, views, key, fmt, perSecond) {
    const svg = $(id), W = width(id), H = 130, L = 64, B = 18;
    svg.textContent = "";
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    let ymax = 1;
    const scale = T.map((t) => perSecond ? 1e6 / t.C.width : 1);
    views.forEach((v, k) => { for (const val of v[key]) ymax = Math.max(ymax, val * scale[k]); });
    const x = (us) => L + (W - L - 6) * (us - startUs) / spanUs;
    const y = (val) => H - B - (H - B - 10) * val / ymax;
    axes(svg, W, H, L, B, spanUs, ymax, fmt, (us) => fmtSec(us));
    views.forEach((v, k) => {
      const t = T[k], pts = [];
      v[key].forEach((val, b) => {
        const t0 = t.S.from_us + b * t.C.width;
        if (t0 > t.S.to_us) return;
        const t1 = Math.min(t.S.to_us, t0 + t.C.width);
        pts.push(x(t0) + "," + y(val * scale[k]), x(t1) + "," + y(val * scale[k]));
      });
      svg.append(el("svg:polyline", {points: pts.join(" "), fill: "none",
                                     stroke: DIFF && k === 0 ? "#888" : "#36c",
                                     "stroke-width": 1.3}));
    });
  }
  function renderBars(id, views, key, labels) {
    const svg = $(id), W = width(id), H = 130, L = 64, B = 30;
    svg.textContent = "";
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    let ymax = 1;
    for (const v of views) for (const val of v[key]) ymax = Math.max(ymax, val);
    axes(svg, W, H, L, B, 0, ymax, fmtBytes, null);
    const n = labels.length, slot = (W - L - 6) / n, bw = slot / (views.length + 0.5);
    views.forEach((v, k) => {
      v[key].forEach((val, c) => {
        const h = (H - B - 10) * val / ymax;
        const r = el("svg:rect", {x: L + c * slot + k * bw + bw / 4, y: H - B - h, width: bw,
                                  height: h, fill: DIFF && k === 0 ? "#aaa" : "#4e79a7"});
        r.append(el("svg:title", {}, labels[c] + (DIFF ? (k ? " (B)" : " (A)") : "") + ": " +
                                     fmtBytes(val) + " (" + pct(val, v.bytes) + ")"));
        svg.append(r);
      });
    });
    const every = Math.ceil(Math.max(...labels.map((l) => l.length)) * 6 / slot);
    labels.forEach((lab, c) => {
      if (c % every === 0)
        svg.append(el("svg:text", {x: L + (c + 0.5) * slot, y: H - B + 12, "text-anchor": "middle"},
                      lab));
    });
  }
  function sizeLabels(limits) {
    return limits.map((hi, c) => hi === null ? "> " + fmtBytes(limits[c - 1]) : "≤ " + fmtBytes(hi));
  }
  function lifeLabels(limits) {
    return limits.map((hi, c) => c === limits.length - 1 ? "not freed"
                               : hi === null ? "> " + fmtDur(limits[c - 1]) : "≤ " + fmtDur(hi));
  }

  // --- flame graph -----------------------------------------------------------------------------
  const ROOT = 0;
  let flameRects = [];
  function renderFlame(views) {
    const v = views[views.length - 1], a = DIFF ? views[0] : null;
    const svg = $("flame"), W = width("flame");
    let top = ROOT;
    if (F.zoom !== null && F.zoom < nNames && v.incl[F.zoom] > 0) top = F.zoom;
    else F.zoom = null;
    const total = v.incl[top];
    const rootTotal = v.incl[ROOT];
    // The heaviest path from the view's top: its depth sets the row height so that it fits.
    let depth = 0;
    for (let n = top; ; depth++) {
      let best = -1;
      for (const c of kids(n)) if (best < 0 || v.incl[c] > v.incl[best]) best = c;
      if (best < 0 || W * v.incl[best] / (total || 1) < 1) break;
      n = best;
    }
    const svgTop = svg.getBoundingClientRect().top + window.scrollY; // the one layout here
    const room = window.innerHeight - svgTop - 6;
    const R = Math.max(12, Math.min(18, Math.floor(room / (depth + 2))));
    // Boxes of at least one pixel, widest first within each parent.
    const boxes = [];
    let maxDepth = 0;
    const pending = [[top, 0, 0]];
    while (pending.length) {
      const [n, x, d] = pending.pop();
      const w = total > 0 ? W * v.incl[n] / total : 0;
      if (w < 1 && n !== top) continue;
      boxes.push([n, x, d, w]);
      maxDepth = Math.max(maxDepth, d);
      const shown = Array.from(kids(n)).filter((c) => v.incl[c] > 0)
                                       .sort((p, q) => v.incl[q] - v.incl[p] || p - q);
      let cx = x;
      for (const c of shown) { pending.push([c, cx, d + 1]); cx += total > 0 ? W * v.incl[c] / total
                                                                            : 0; }
    }
    const H = (maxDepth + 1) * R + 2;
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    const needle = F.search.toLowerCase();
    let hits = 0;
    const hitName = new Uint8Array(nNames);
    if (needle) {
      // Share of the matches: the bytes under the outermost matching boxes.
      const fnHit = fnNames.map((name) => name.toLowerCase().includes(needle));
      const under = new Uint8Array(nNames); // some caller matches
      for (let n = 1; n < nNames; n++) {
        const p = nParent[n];
        under[n] = under[p] || hitName[p];
        hitName[n] = fnHit[nFn[n]] ? 1 : 0;
        if (hitName[n] && !under[n]) hits += v.incl[n];
      }
    }
    // One markup string: thousands of boxes are much faster to parse than to create one by one.
    flameRects = [];
    const out = [];
    for (const [n, x, d, w] of boxes) {
      const yy = F.up ? H - (d + 1) * R : d * R;
      const name = n === ROOT ? "all" : fnNames[nFn[n]];
      const pruned = name === PRUNED;
      let fill = pruned ? "#ccc" : hashColor(name);
      if (a) {
        const before = a.incl[n], after = v.incl[n];
        const ch = before > 0 ? (after - before) / before : 1;
        const k = Math.min(1, Math.abs(ch));
        fill = ch >= 0 ? "hsl(0,80%," + (92 - 35 * k) + "%)" : "hsl(210,80%," + (92 - 35 * k) + "%)";
      }
      const cls = (pruned ? "pruned" : "") + (needle && hitName[n] ? " hit" : "");
      out.push('<g data-node="', n, '" data-depth="', d, '" data-name="', esc(name),
               '" data-bytes="', Math.round(v.incl[n]), '"><rect x="', x.toFixed(2), '" y="', yy,
               '" width="', Math.max(w, 0.5).toFixed(2), '" height="', R - 1, '" fill="', fill,
               cls ? '" class="' + cls : "", '"/>');
      if (w > 28)
        out.push('<text x="', (x + 3).toFixed(1), '" y="', yy + R - 4, '">',
                 esc(name.length * 6.6 > w - 6 ? name.slice(0, Math.max(1, Math.floor((w - 6) /
                                                                                  6.6) - 1)) + "…"
                                                : name), "</text>");
      out.push("</g>");
      flameRects.push(n);
    }
    svg.innerHTML = out.join("");
    svg.classList.toggle("searching", !!needle);
    $("flame-match").textContent = needle ? "matches: " + fmtBytes(hits) + ", " +
                                            pct(hits, rootTotal) + " of the graph" : "";
    document.body.dataset.searchShare = needle ? String(rootTotal > 0 ? hits / rootTotal : 0) : "";
    $("flame-title").textContent = "Flame graph: " + (F.show === "live" ? "bytes still live"
                                   : "bytes allocated") + (F.up ? ", callers at the bottom" :
                                   ", callers at the top") + (DIFF ? "; width by B, red grew, " +
                                   "blue shrank since A" : "") + (top !== ROOT ? " — zoomed on " +
                                   fnNames[nFn[top]] : "");
    document.body.dataset.flameBoxes = String(boxes.length);
    svg._v = v; svg._a = a; svg._total = rootTotal;
  }
  function flamePath(n) {
    const names = [];
    for (; n > 0; n = nParent[n]) names.push(fnNames[nFn[n]]);
    return names.reverse();
  }
  function setupFlameEvents() {
    const svg = $("flame"), tip = $("flame-tip");
    const nodeOf = (e) => { const g = e.target.closest("g"); return g ? Number(g.dataset.node)
                                                                       : null; };
    svg.addEventListener("mousemove", (e) => {
      const n = nodeOf(e);
      if (n === null) { tip.hidden = true; return; }
      const v = svg._v, a = svg._a, total = svg._total;
      const name = n === ROOT ? "all" : fnNames[nFn[n]];
      let text = name + "\n" + fmtBytes(v.incl[n]) + " (" + pct(v.incl[n], total) + ")" +
                 (v.self[n] > 0 ? ", " + fmtBytes(v.self[n]) + " in the function itself" : "");
      if (name === PRUNED) text += "\nthe callees too small to show at this size, merged";
      if (a) text += "\nA: " + fmtBytes(a.incl[n]) + ", change " + (v.incl[n] >= a.incl[n] ? "+"
                                                                                        : "") +
                     fmtBytes(v.incl[n] - a.incl[n]);
      tip.textContent = text + "\nclick: zoom and show callers and callees";
      tip.hidden = false;
      const box = svg.parentNode.getBoundingClientRect();
      tip.style.left = Math.min(e.clientX - box.left + 12, box.width - 360) + "px";
      tip.style.top = e.clientY - box.top + 14 + "px";
    });
    svg.addEventListener("mouseleave", () => { tip.hidden = true; });
    svg.addEventListener("click", (e) => {
      const n = nodeOf(e);
      if (n === null) return;
      F.zoom = n === ROOT || n === F.zoom ? null : n;
      if (n !== ROOT) F.fnPanel = fnNames[nFn[n]];
      apply();
    });
    $("flame-unzoom").addEventListener("click", () => { F.zoom = null; apply(); });
    $("flame-up").addEventListener("change", () => { F.up = $("flame-up").checked; apply(); });
    $("flame-search").addEventListener("keydown", (e) => {
      if (e.key === "Enter") { F.search = $("flame-search").value.trim(); apply(); }
    });
  }

  // --- tables ----------------------------------------------------------------------------------
  const tables = {};
  function makeTable(id, noun, columns, defaultSort) {
    const box = $(id + "-box");
    const head = el("div", {class: "tablehead"});
    head.append(el("h2", {}, noun.title));
    const search = el("input", {id: id + "-search", placeholder: "search " + noun.plural});
    const count = el("span", {class: "count", id: id + "-count"});
    const more = el("button", {type: "button", id: id + "-more"}, "show all");
    head.append(search, count, more);
    const table = el("table", {id});
    const tr = el("tr");
    columns.forEach((c, i) => {
      const th = el("th", {class: c.num ? "num" : "", "data-col": i}, c.label);
      if (c.title) th.title = c.title;
      tr.append(th);
    });
    const thead = el("thead");
    thead.append(tr);
    table.append(thead, el("tbody"));
    box.append(head, table);
    const st = {id, noun, columns, sort: defaultSort, asc: false, rows: [], limit: 100, search};
    tr.addEventListener("click", (e) => {
      const th = e.target.closest("th");
      if (!th) return;
      const i = Number(th.dataset.col);
      if (st.sort === i) st.asc = !st.asc;
      else { st.sort = i; st.asc = !columns[i].num; }
      drawTable(st);
    });
    search.addEventListener("input", () => drawTable(st));
    more.addEventListener("click", () => { st.limit = st.limit ? 0 : 100; drawTable(st); });
    tables[id] = st;
    return st;
  }
  function drawTable(st) {
    const c = st.columns[st.sort], dir = st.asc ? 1 : -1, q = st.search.value.trim().toLowerCase();
    let rows = st.rows;
    if (q) rows = rows.filter((r) => r.name.toLowerCase().includes(q));
    rows = rows.slice().sort((p, r) => {
      const x = c.get(p), y = c.get(r);
      if (x !== y) return (x < y ? -1 : 1) * dir;
      return p.name < r.name ? -1 : p.name > r.name ? 1 : 0;
    });
    const shown = st.limit ? rows.slice(0, st.limit) : rows;
    const tbody = $(st.id).querySelector("tbody");
    tbody.textContent = "";
    const frag = document.createDocumentFragment();
    for (const r of shown) {
      const tr = el("tr", {"data-bytes": Math.round(r.bytes)});
      if (r.exc !== undefined) tr.dataset.exclusive = String(Math.round(r.exc));
      st.columns.forEach((col) => {
        if (col.link) {
          const td = el("td", {class: "name"});
          td.append(el("a", {"data-fn": col.link(r)}, r.name));
          tr.append(td);
        } else {
          tr.append(el("td", {class: col.num ? "num" : "name"}, col.fmt(col.get(r), r)));
        }
      });
      frag.append(tr);
    }
    tbody.append(frag);
    $(st.id).querySelectorAll("th").forEach((th, i) => {
      th.classList.toggle("sorted", i === st.sort);
      th.classList.toggle("asc", i === st.sort && st.asc);
    });
    const total = st.rows.length, noun = total === 1 ? st.noun.one : st.noun.plural;
    $(st.id + "-count").textContent = q ? shown.length + " of " + rows.length + " " + noun +
                                            " matching “" + st.search.value.trim() + "” (" + total +
                                            " in all)"
                                        : shown.length + " of " + total + " " + noun;
    $(st.id + "-more").textContent = st.limit ? "show all" : "show 100";
    $(st.id + "-more").hidden = rows.length <= 100;
    document.body.dataset[st.id + "Rows"] = String(shown.length);
  }
  // A change B - A, "~" when within twice its sampling noise, as memtap diff says it: a side's
  // bytes are samples times its bytes per sample, its samples a thinning at rate λ of its
  // objects, so its variance is bytes x bytes-per-sample x (1 - λ): none at λ = 1 (--full).
  const spread = (t) => t.bps * Math.max(0, 1 - t.S.sample_rate);
  function fmtChange(_, r) {
    const x = r.bytes - r.a;
    const noise = DIFF ? 2 * Math.sqrt(r.a * spread(T[0]) + r.bytes * spread(T[1])) : 0;
    return (Math.abs(x) < noise ? "~" : "") + (x > 0 ? "+" : "") + fmtBytes(x);
  }
  const bytesCol = (label, get, title) => ({label, num: true, get, fmt: fmtBytes, title});
  function setupTables() {
    const metric = () => F.show === "live" ? "live bytes" : "bytes";
    const siteCols = DIFF ? [
      {label: "site", get: (r) => r.name, fmt: (x) => x},
      bytesCol("A", (r) => r.a), bytesCol("B", (r) => r.bytes),
      {label: "change", num: true, get: (r) => Math.abs(r.bytes - r.a), fmt: fmtChange,
       title: "B - A, sorted by size; ~: smaller than twice the sampling noise of the two traces"},
      {label: "change %", num: true, get: (r) => r.a > 0 ? (r.bytes - r.a) / r.a : Infinity,
       fmt: (x) => x === Infinity ? "new" : (x > 0 ? "+" : "") + (100 * x).toFixed(1) + "%"}]
    : [{label: "site", get: (r) => r.name, fmt: (x) => x},
       bytesCol(metric(), (r) => r.bytes, "Bytes the view counts (see Show)"),
       {label: "share", num: true, get: (r) => r.bytes, fmt: (x) => pct(x, tables.sites.total)},
       {label: "objects", num: true, get: (r) => r.est, fmt: fmtCount,
        title: "Estimated number of objects"},
       {label: "sampled", num: true, get: (r) => r.obj, fmt: (x) => String(x),
        title: "Objects the trace recorded"},
       bytesCol("still live", (r) => r.live, "Of these, still live at the end of the range")];
    makeTable("sites", {title: "Allocation sites", one: "site", plural: "sites"}, siteCols,
              DIFF ? 3 : 1);
    const fnCols = [
      {label: "function", get: (r) => r.name, fmt: (x) => x, link: (r) => r.name},
      bytesCol("inclusive", (r) => r.bytes, "Bytes allocated in it or anything it called"),
      {label: "inclusive %", num: true, get: (r) => r.bytes, fmt: (x) => pct(x, tables.functions
                                                                                  .total)},
      bytesCol("exclusive", (r) => r.exc, "Bytes allocated by the function itself")];
    if (DIFF) fnCols.push(bytesCol("A inclusive", (r) => r.a),
                          {label: "change", num: true, get: (r) => Math.abs(r.bytes - r.a),
                           fmt: fmtChange,
                           title: "~: smaller than twice the sampling noise of the two traces"});
    makeTable("functions", {title: "Functions", one: "function", plural: "functions"}, fnCols, 1);
    $("functions").addEventListener("click", (e) => {
      const a = e.target.closest("a");
      if (a) { F.fnPanel = a.dataset.fn; apply(); $("callers").scrollIntoView({block: "start"}); }
    });
  }
  function fillTables(views) {
    const v = views[views.length - 1], a = DIFF ? views[0] : null;
    const rows = [];
    const seen = new Set();
    for (const [site, e] of v.sites) {
      seen.add(site);
      rows.push({name: siteNames[site], bytes: e.bytes, est: e.est, obj: e.obj, live: e.live,
                 a: a && a.sites.has(site) ? a.sites.get(site).bytes : 0});
    }
    if (a) for (const [site, e] of a.sites) if (!seen.has(site))
      rows.push({name: siteNames[site], bytes: 0, est: 0, obj: 0, live: 0, a: e.bytes});
    tables.sites.rows = rows.filter((r) => r.bytes > 0 || r.a > 0);
    tables.sites.total = v.bytes;
    drawTable(tables.sites);
    const ft = functionTotals(v), fa = a ? functionTotals(a) : null;
    const frows = [];
    for (let f = 0; f < fnNames.length; f++)
      if (ft.inc[f] > 0 || (fa && fa.inc[f] > 0))
        frows.push({name: fnNames[f], bytes: ft.inc[f], exc: ft.exc[f], a: fa ? fa.inc[f] : 0});
    tables.functions.rows = frows;
    tables.functions.total = v.bytes;
    drawTable(tables.functions);
    v.fn = ft;
  }

  // --- callers and callees of one function -----------------------------------------------------
  function renderCallers(views) {
    const box = $("callers"), v = views[views.length - 1];
    box.textContent = "";
    const f = F.fnPanel === null ? undefined : fnIds.get(F.fnPanel);
    if (f === undefined) { box.hidden = true; document.body.dataset.callers = ""; return; }
    box.hidden = false;
    // As `memtap callers`: per backtrace, the caller of the function's outermost call and the
    // callee of its innermost one (or the function itself), so both lists add up to its inclusive
    // bytes. topF[n]: the bytes under the outermost calls of the function in n's subtree.
    const callers = new Map(), callees = new Map();
    const topF = new Float64Array(nNames), below = new Float64Array(nNames);
    for (let n = nNames - 1; n > 0; n--) {
      topF[n] = nFn[n] === f ? v.incl[n] : below[n];
      below[nParent[n]] += topF[n];
    }
    let inc = 0, exc = 0;
    for (let n = 1; n < nNames; n++) {
      if (nFn[n] !== f || v.incl[n] <= 0) continue;
      exc += v.self[n];
      for (const c of kids(n)) {
        const rest = v.incl[c] - topF[c]; // what does not reach a deeper call of the function
        if (rest > 0) {
          const name = fnNames[nFn[c]];
          callees.set(name, (callees.get(name) || 0) + rest);
        }
      }
      if (!outer[n]) continue;
      inc += v.incl[n];
      const p = nParent[n], caller = p > 0 ? fnNames[nFn[p]] : "(the start of the backtrace)";
      callers.set(caller, (callers.get(caller) || 0) + v.incl[n]);
    }
    if (exc > 0) callees.set("(allocated by the function itself)", exc);
    box.dataset.inclusive = String(Math.round(inc));
    box.append(el("h2", {}, fnNames[f]));
    box.append(el("p", {}, fmtBytes(inc) + " (" + pct(inc, v.bytes) + ") allocated in it or its " +
                           "callees, " + fmtBytes(exc) + " by the function itself. Click a name " +
                           "to follow it."));
    const cols = el("div", {class: "cols"});
    for (const [title, m, id] of [["Called by", callers, "callers-in"],
                                  ["Calls", callees, "callers-out"]]) {
      const d = el("div");
      d.append(el("h3", {}, title));
      const t = el("table", {id});
      const head = el("tr");
      head.append(el("th", {}, "function"), el("th", {class: "num"}, "bytes"),
                  el("th", {class: "num"}, "share"));
      t.append(el("thead"), el("tbody"));
      t.tHead.append(head);
      [...m].sort((p, q) => q[1] - p[1] || (p[0] < q[0] ? -1 : 1)).slice(0, 50).forEach(([n, b]) => {
        const tr = el("tr", {"data-bytes": Math.round(b)});
        const td = el("td", {class: "name"});
        if (fnIds.has(n)) td.append(el("a", {"data-fn": n}, n)); else td.textContent = n;
        tr.append(td, el("td", {class: "num"}, fmtBytes(b)), el("td", {class: "num"}, pct(b, inc)));
        t.tBodies[0].append(tr);
      });
      d.append(t);
      cols.append(d);
    }
    box.append(cols);
    box.onclick = (e) => { const a = e.target.closest("a"); if (a) { F.fnPanel = a.dataset.fn;
                                                                     apply(); } };
    document.body.dataset.callers = fnNames[f];
  }

  // --- everything ------------------------------------------------------------------------------
  let applied = 0;
  function apply() {
    const mark = (name) => { if (!applied) performance.mark("memtap-" + name); };
    measure();
    $("heap-tip").hidden = $("flame-tip").hidden = true; // their values are about to change
    const views = T.map(compute);
    mark("computed");
    renderSelection(views);
    renderHeap(views);
    mark("heap");
    renderFlame(views);
    mark("flame");
    fillTables(views);
    mark("tables");
    renderCallers(views);
    renderSeries("rate", views, "rate", (x) => fmtBytes(x) + "/s", true);
    renderSeries("count", views, "count", fmtCount, true);
    renderBars("sizes", views, "sizes", sizeLabels(CUR.ds.size_limits));
    renderBars("lifetimes", views, "lifes", lifeLabels(CUR.ds.lifetime_limits));
    toHash();
    document.body.dataset.applied = String(++applied);
  }
  function applyForm() { readForm(); snapForm(); writeForm(); F.zoom = null; apply(); }

  renderOverview();
  fromHash();
  writeForm();
  setupTables();
  setupHeapEvents();
  setupFlameEvents();
  $("f-apply").addEventListener("click", applyForm);
  $("f-show").addEventListener("change", applyForm);
  $("filters").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target.tagName === "INPUT") { e.preventDefault(); applyForm(); }
  });
  $("f-reset").addEventListener("click", () => {
    for (const k of ["from", "to", "sizeMin", "sizeMax", "lifeMin", "lifeMax"]) F[k] = null;
    F.fn = F.notFn = F.search = ""; F.zoom = null; F.show = "alloc";
    writeForm();
    apply();
  });
  window.addEventListener("hashchange", () => { fromHash(); writeForm(); apply(); });
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    if (resizeTimer) cancelAnimationFrame(resizeTimer);
    resizeTimer = requestAnimationFrame(apply);
  });
  snapForm();
  writeForm();
  apply();
  performance.mark("memtap-drawn");
  document.body.dataset.ready = "1";
})();
