// memtap report: renders the data embedded by src/export/html.c (no libraries, no network).
// Filters work on cells: (stack, allocation-time bucket, free-time bucket, size class, lifetime
// class) -> objects, samples, estimated objects. Times are in bucket steps of data.cells.width us.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("memtap-data").textContent);
  const NEVER = 255, BEFORE = 255;
  const S = data.summary, C = data.cells;
  const bps = S.bytes_per_sample;
  const $ = (id) => document.getElementById(id);
  const SVGNS = "http://www.w3.org/2000/svg";

  function fmtBytes(b) {
    const u = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(b) >= 1000 && i < u.length - 1) { b /= 1000; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(Math.abs(b) < 100 ? 1 : 0)) + " " + u[i];
  }
  function fmtSec(us) { return (us / 1e6).toFixed(3) + " s"; }
  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4))
                                     : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function frameName(f) {
    const fr = data.frames[f];
    return fr[1] ? fr[0] + " " + fr[1] + ":" + fr[2] : fr[0];
  }
  // Stacks are paths in a trie: node = [parent, frame]; stacks[i] = node index.
  const stackFrames = data.stacks.map((node) => {
    const out = [];
    for (let n = node; n >= 0; n = data.nodes[n][0]) out.push(data.nodes[n][1]);
    return out.reverse();
  });

  // --- summary -------------------------------------------------------------------------------
  function renderSummary() {
    const t = $("summary");
    const rows = [
      ["executable", S.executable],
      ["duration", fmtSec(S.duration_us)],
      ["window", fmtSec(S.from_us) + " to " + fmtSec(S.to_us)],
      ["sampling rate", S.sample_rate + " (one sample ~" + fmtBytes(bps) + ")"],
      ["allocated", S.allocated.objects + " sampled objects, ~" +
        fmtBytes(S.allocated.samples * bps) + ", ~" + Math.round(S.allocated.objects_estimated) +
        " objects"],
      ["freed", S.freed.objects + " sampled objects, ~" + fmtBytes(S.freed.samples * bps)],
      ["peak live heap", "~" + fmtBytes(S.peak.samples * bps) + " at " + fmtSec(S.peak_time_us)],
      ["live at end (not freed)", S.live_end.objects + " sampled objects, ~" +
        fmtBytes(S.live_end.samples * bps)],
    ];
    for (const [k, v] of rows) {
      const tr = el("tr");
      tr.append(el("th", {}, k), el("td", {}, v));
      t.append(tr);
    }
  }

  // --- filters -------------------------------------------------------------------------------
  function bucketOf(us) { return Math.floor((us - S.from_us) / C.width); }
  function readFilters() {
    const num = (id) => { const v = $(id).value.trim(); return v === "" ? null : Number(v); };
    return {
      allocFrom: num("f-alloc-from"), allocTo: num("f-alloc-to"),
      liveFrom: num("f-live-from"), liveTo: num("f-live-to"),
      sizeMin: num("f-size-min"), sizeMax: num("f-size-max"),
      lifeMin: num("f-life-min"), lifeMax: num("f-life-max"),
      fn: $("f-fn").value, notFn: $("f-notfn").value,
    };
  }
  const fnMatchCache = new Map();
  function stackMatches(stack, needle, cacheKey) {
    const key = cacheKey + "\u0000" + stack;
    if (fnMatchCache.has(key)) return fnMatchCache.get(key);
    const r = stackFrames[stack].some((f) => data.frames[f][0].includes(needle));
    fnMatchCache.set(key, r);
    return r;
  }
  function cellPasses(c, f) {
    const [stack, ab, fb, sc, lc] = c;
    if (f.allocFrom !== null || f.allocTo !== null) {
      if (ab === BEFORE) return false;
      const t0 = S.from_us + ab * C.width, t1 = t0 + C.width;
      if (f.allocFrom !== null && t1 <= f.allocFrom * 1e6) return false;
      if (f.allocTo !== null && t0 > f.allocTo * 1e6) return false;
    }
    if (f.liveFrom !== null || f.liveTo !== null) {
      // live at some moment of [liveFrom, liveTo]: allocated before its end, freed after its start
      const b0 = bucketOf((f.liveFrom !== null ? f.liveFrom : f.liveTo) * 1e6);
      const b1 = bucketOf((f.liveTo !== null ? f.liveTo : f.liveFrom) * 1e6);
      if (ab !== BEFORE && ab > b1) return false;
      if (fb !== NEVER && fb <= b0) return false;
    }
    const size = data.size_limits[sc];
    const below = sc > 0 ? data.size_limits[sc - 1] : 0;
    if (f.sizeMin !== null && (size !== null && size < f.sizeMin)) return false;
    if (f.sizeMax !== null && below >= f.sizeMax) return false;
    if (f.lifeMin !== null || f.lifeMax !== null) {
      const hi = data.lifetime_limits[lc], lo = lc > 0 ? data.lifetime_limits[lc - 1] : 0;
      if (f.lifeMin !== null && hi !== null && hi < f.lifeMin * 1e6) return false;
      if (f.lifeMax !== null && (lc === data.lifetime_limits.length - 1 ||
                                 lo >= f.lifeMax * 1e6)) return false;
    }
    if (f.fn && !stackMatches(stack, f.fn, "+" + f.fn)) return false;
    if (f.notFn && stackMatches(stack, f.notFn, "+" + f.notFn)) return false;
    return true;
  }

  // --- chart ---------------------------------------------------------------------------------
  function renderChart(cells) {
    const svg = $("chart");
    svg.textContent = "";
    const W = 1000, H = 220, L = 70, B = 24;
    const tl = data.timeline;
    const span = Math.max(1, S.to_us - S.from_us);
    const filtered = new Array(C.buckets).fill(0);
    for (const c of cells) {
      const [, ab, fb] = c, bytes = c[6] * bps;
      const lo = ab === BEFORE ? 0 : ab, hi = fb === NEVER ? C.buckets : fb;
      for (let b = lo; b < hi && b < C.buckets; b++) filtered[b] += bytes;
    }
    let ymax = 1;
    for (const v of tl.live_max) ymax = Math.max(ymax, v);
    for (const v of filtered) ymax = Math.max(ymax, v);
    const x = (us) => L + (W - L - 10) * (us - S.from_us) / span;
    const y = (v) => H - B - (H - B - 10) * v / ymax;
    const pts = tl.live_max.map((v, i) => x(S.from_us + (i + 1) * tl.width > S.to_us ? S.to_us :
                                               S.from_us + (i + 1) * tl.width) + "," + y(v));
    pts.unshift(x(S.from_us) + "," + y(tl.live_max.length ? tl.live_max[0] : 0));
    svg.append(el("svg:polyline", {points: pts.join(" "), fill: "none", stroke: "#c33",
                                   "stroke-width": 1.5, id: "chart-total"}));
    const fpts = filtered.map((v, b) => x(Math.min(S.to_us, S.from_us + (b + 1) * C.width)) +
                                        "," + y(v))
                         .filter((_, b) => S.from_us + b * C.width <= S.to_us);
    svg.append(el("svg:polyline", {points: fpts.join(" "), fill: "none", stroke: "#36c",
                                   "stroke-width": 1.5, id: "chart-filtered"}));
    svg.append(el("svg:line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#888"}));
    svg.append(el("svg:line", {x1: L, y1: 10, x2: L, y2: H - B, stroke: "#888"}));
    for (let i = 0; i <= 4; i++) {
      svg.append(el("svg:text", {x: 4, y: y(ymax * i / 4) + 4, "font-size": 10},
                    fmtBytes(ymax * i / 4)));
      const t = S.from_us + span * i / 4;
      svg.append(el("svg:text", {x: x(t) - 20, y: H - 6, "font-size": 10}, fmtSec(t)));
    }
    svg.append(el("svg:circle", {cx: x(S.peak_time_us), cy: y(S.peak.samples * bps), r: 3,
                                 fill: "#c33"}));
    document.body.dataset.chartPoints = String(pts.length + fpts.length);
  }

  // --- flame graph ---------------------------------------------------------------------------
  let zoom = null; // path of names from the root to the zoomed node
  function renderFlame(perStack) {
    const inverted = $("f-inverted").checked;
    const root = {name: "all", value: 0, children: new Map()};
    perStack.forEach((v, s) => {
      if (v <= 0) return;
      let frames = stackFrames[s].map((f) => data.frames[f][0]);
      if (inverted) frames = frames.slice().reverse();
      if (!frames.length) frames = ["<no backtrace>"];
      let n = root;
      n.value += v;
      for (const name of frames) {
        let c = n.children.get(name);
        if (!c) { c = {name, value: 0, children: new Map()}; n.children.set(name, c); }
        c.value += v;
        n = c;
      }
    });
    let top = root;
    if (zoom) for (const name of zoom) { const c = top.children.get(name); if (!c) break; top = c; }
    const svg = $("flame");
    svg.textContent = "";
    const W = 1000, R = 17;
    let count = 0, maxDepth = 0;
    const rects = [];
    (function walk(n, x, depth, path) {
      const w = top.value ? (W * n.value) / top.value : 0;
      if (w < 0.5) return;
      rects.push([n, x, depth, w, path]);
      maxDepth = Math.max(maxDepth, depth);
      for (const c of [...n.children.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
        walk(c, x, depth + 1, path.concat([c.name]));
        x += top.value ? (W * c.value) / top.value : 0;
      }
    })(top, 0, 0, zoom || []);
    const H = (maxDepth + 1) * R + 4;
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    for (const [n, x, depth, w, path] of rects) {
      const yy = inverted ? depth * R : H - (depth + 1) * R;
      let h = 0;
      for (let i = 0; i < n.name.length; i++) h = (h * 31 + n.name.charCodeAt(i)) >>> 0;
      const g = el("svg:g");
      g.append(el("svg:title", {}, n.name + " — " + fmtBytes(n.value) + " (" +
                                   (100 * n.value / (root.value || 1)).toFixed(2) + "%)"));
      const r = el("svg:rect", {x, y: yy, width: w, height: R - 1,
                                fill: "hsl(" + (h % 50 + 10) + ",75%," + (55 + h % 20) + "%)"});
      r.addEventListener("click", () => { zoom = n === top ? null : path; apply(); });
      g.append(r);
      if (w > 40)
        g.append(el("svg:text", {x: x + 3, y: yy + 12},
                    n.name.slice(0, Math.floor((w - 6) / 7))));
      svg.append(g);
      count++;
    }
    document.body.dataset.flameNodes = String(count);
  }

  // --- table ---------------------------------------------------------------------------------
  function renderTable(cells) {
    const sites = new Map();
    for (const c of cells) {
      const site = data.stack_sites[c[0]];
      let s = sites.get(site);
      if (!s) { s = {site, samples: 0, objects: 0, est: 0, live: 0}; sites.set(site, s); }
      s.samples += c[6]; s.objects += c[5]; s.est += c[7];
      if (c[2] === NEVER) s.live += c[6];
    }
    const rows = [...sites.values()].sort((a, b) => b.samples - a.samples || a.site - b.site);
    const tbody = $("sites").querySelector("tbody");
    tbody.textContent = "";
    for (const s of rows.slice(0, 100)) {
      const tr = el("tr");
      tr.append(el("td", {class: "num"}, fmtBytes(s.samples * bps)),
                el("td", {class: "num"}, String(s.objects)),
                el("td", {class: "num"}, String(Math.round(s.est))),
                el("td", {class: "num"}, fmtBytes(s.live * bps)),
                el("td", {class: "mono"}, s.site >= 0 ? frameName(s.site) : "<no backtrace>"));
      tbody.append(tr);
    }
    document.body.dataset.tableRows = String(Math.min(rows.length, 100));
    document.body.dataset.tableTop = rows.length ? (rows[0].site >= 0 ? frameName(rows[0].site)
                                                                      : "<no backtrace>") : "";
    $("status").textContent = rows.length + " sites, " + cells.length + " of " + C.rows.length +
                              " cells match";
  }

  function apply() {
    const f = readFilters();
    const cells = C.rows.filter((c) => cellPasses(c, f));
    const perStack = new Array(data.stacks.length).fill(0);
    for (const c of cells) perStack[c[0]] += c[6] * bps;
    renderChart(cells);
    renderFlame(perStack);
    renderTable(cells);
  }

  // Filters can be given in the URL: #fn=NAME&notfn=NAME&alloc_from=S&alloc_to=S&live_from=S&
  // live_to=S&size_min=B&size_max=B&life_min=S&life_max=S&inverted=1
  function fromHash() {
    const ids = {fn: "f-fn", notfn: "f-notfn", alloc_from: "f-alloc-from", alloc_to: "f-alloc-to",
                 live_from: "f-live-from", live_to: "f-live-to", size_min: "f-size-min",
                 size_max: "f-size-max", life_min: "f-life-min", life_max: "f-life-max"};
    const params = new URLSearchParams(location.hash.slice(1));
    for (const [k, v] of params) {
      if (ids[k]) $(ids[k]).value = v;
      if (k === "inverted") $("f-inverted").checked = v === "1";
    }
  }

  renderSummary();
  fromHash();
  $("f-apply").addEventListener("click", apply);
  $("f-reset").addEventListener("click", () => {
    for (const i of document.querySelectorAll("#filters input[type=text]")) i.value = "";
    zoom = null;
    apply();
  });
  $("f-inverted").addEventListener("change", () => { zoom = null; apply(); });
  apply();
  document.body.dataset.ready = "1";
})();
