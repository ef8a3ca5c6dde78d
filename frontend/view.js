// The viewer: the launch list, and a launch's panels (grid, program, source, findings, tensor, charts, compiled),
// mounted in one root element. The host decides where payloads come from and how a place is remembered:
// app.js (the browser page: the JSON API and the URL's hash) and embed.js (a notebook output: payloads
// inlined in the output, no URL). Every payload is documented in triton_trace/view/contract.py.
import { BlockView } from "./block.js";
import { Charts } from "./charts.js";
import { CompareCard } from "./compare.js";
import { CompiledPanel } from "./compiled.js";
import { FindingsList, ProgramDetail, SourceView } from "./detail.js";
import { clear, fmtNum, h, pidText, scoped } from "./dom.js";
import { FindingCard } from "./evidence.js";
import { ProgramGrid, telling } from "./grid.js";
import { linearOf } from "./layout.js";
import { installNavigation } from "./navigate.js";
import { PanelPlaces, parsePlace, placeKey } from "./places.js";
import { PrecisionColumn } from "./precision.js";
import { apiUrl } from "./routes.js";
import { StoragePanel } from "./storage.js";
import { TensorView } from "./tensor.js";
import { TilesPanel } from "./tiles.js";
import { fmtBytes, fmtPct, fmtSig } from "./units.js";

if (!window.ttPerf) window.ttPerf = [];   // {what, ms}: click-to-update latencies, read by the benchmark

const idle = (fn) => (window.requestIdleCallback ? requestIdleCallback(fn, { timeout: 1000 }) : setTimeout(fn, 50));
const sum = (a) => a.reduce((x, y) => x + y, 0);

// host: {request(url) -> Promise<{body} | {error}>, routes: the server's route table (routes.js), plotly() ->
// Promise<Plotly>, remember(place) (record the place, e.g. in the URL), replace(place) (optional: correct the
// recorded place without a step of history, as a panel that follows the view does), link(place) -> href or null, keys:
// where arrow keys are listened to}. Panels ask for payloads by route name and values, never by a URL.
export function mount(root, host) {
  const $ = scoped(root);
  const S = { routes: 0, routing: 0, trace: null, li: null, launch: null, findings: null, z: 0, metric: "load_bytes", pid: null,
              op: null, program: null, pending: null, place: null, compiled: null, finding: null, focusLine: null,
              metricChosen: false };

  const url = (route, values) => apiUrl(host.routes, route, values);
  async function api(route, values) {
    const res = await host.request(url(route, values));
    if (res.error) { showError(res.error); return null; }
    return res.body;
  }
  const prefetch = (path) => { host.request(path); };    // what a click would need, while the pointer rests on it

  function showError(msg) { const b = $("error"); b.textContent = msg; b.hidden = false; }
  function clearError() { $("error").hidden = true; }
  function status(msg) { $("status").textContent = msg; }

  // a tensor element clicked: its accesses are listed, and the place (the URL) names it
  const tensor = new TensorView($, api, url, (pid, seq) => go(S.li, pid, seq, null),
    (el) => host.remember({ view: "launch", li: S.li, pid: S.pid, op: S.pid ? S.op : null, el, compiled: S.compiled, ...panels() }));
  const storage = new StoragePanel($, api), tiles = new TilesPanel($, api);
  tensor.onShown = (sel) => storage.follow(sel);
  tensor.onFeeds = (feeds) => tiles.outline(feeds);          // what fed a picked element: outlined on every input
  const places = new PanelPlaces(S, { storage, tiles, tensor }, host);
  const panels = () => places.part();
  storage.onMoved = tiles.onMoved = () => places.moved();

  function prefetchProgram(pid) {
    prefetch(url("program", { i: S.li, pid }));
    const view = tensor.urlFor(pid, null);
    if (view) prefetch(view);
  }
  const grid = new ProgramGrid($, (pid, t0) => { prefetchProgram(pid); go(S.li, pid, null, { what: "grid-click", t0 }); }, prefetchProgram);
  const source = new SourceView($), precisionColumn = new PrecisionColumn($("source"));
  const block = new BlockView($, api);
  const charts = new Charts($, api, host.plotly);
  const comparison = new CompareCard($, api);
  // its errors (a compile that failed, a target a notebook output does not carry) are shown in the panel
  const compiled = new CompiledPanel($, (route, values) => host.request(url(route, values)), (c) => go(S.li, S.pid, S.op, null, c));
  let detail = null;
  const findings = new FindingsList($, (k, t0) => selectFinding(k, { what: "finding-click", t0 }),
    (hint) => source.mark(S.program ? S.program.ops.line : [], hint.line));
  const reveal = (id) => requestAnimationFrame(() => $(id).scrollIntoView({ block: "nearest" }));
  const card = new FindingCard($, {
    select: (k) => selectFinding(k, null),
    line: (k) => { source.mark(S.program ? S.program.ops.line : [], S.findings.line[k]); reveal("source-panel"); },
    program: (k, j) => {
      const ev = S.findings.evidence[k];
      go(S.li, ev.programs[j], j === 0 ? S.findings.op[k] : null, null, undefined, j === 0);
    },
    element: (k, j) => {
      const ev = S.findings.evidence[k];
      // a release's lock: the lock tensor itself, its element outlined (the stores are the card's other step)
      if (ev.indices[j] && ev.tensor_index !== null && ev.stores) tensor.showElement({ t: ev.tensor_index, index: ev.indices[j] });
      else if (ev.indices[j] && ev.tensor_index !== null) tensor.touchesAt(ev.tensor_index, ev.indices[j]);
      reveal("tensor-panel");
    },
    store: (k, j) => {
      const ev = S.findings.evidence[k], s = ev.stores[j];
      tensor.setFocus(card.storeFocus(k, j));
      go(S.li, ev.programs[0] || S.pid, s.seq, null, undefined, true);
      reveal("tensor-panel");
    },
  });

  // A finding: its line, its programs (all of them ringed on the grid) and its elements (on the tensor) at once.
  function selectFinding(k, pending) {
    const f = S.findings, ev = f.evidence[k];
    S.finding = k;
    card.show(k);
    findings.highlight(k);
    tensor.setFocus(card.focus(k));
    // every program of the finding (the payload's runs), not only the one or two the card names
    grid.marks = ev.grid || { ranges: ev.programs.map((p) => [grid.linear(p), grid.linear(p)]), writers: null, readers: null };
    if (f.program[k]) return go(S.li, f.program[k], card.op(k), pending, undefined, true);
    S.focusLine = f.line[k];
    grid.draw();
    return go(S.li, null, null, pending, undefined, true);
  }

  // The Compiled panel stays open while programs and ops are picked in the same launch. ``finding``: the
  // navigation comes from a finding, whose line (a NaN's birth line) stays the one marked in the source.
  function go(li, pid, op, pending, comp, finding) {
    S.focusLine = finding && S.finding !== null ? S.findings.line[S.finding] : null;
    if (!finding && tensor.focus) tensor.focus = { ...tensor.focus, mode: null };   // a plain click shows the op itself
    S.pending = pending || null;
    if (comp === undefined) comp = li === S.li ? S.compiled : null;
    const place = li === null ? { view: "list" } : { view: "launch", li, pid, op: pid ? op ?? null : null, compiled: comp,
                                                      ...(li === S.li ? panels() : {}) };
    host.remember(place);
    return route(place, true);
  }

  // Links (breadcrumbs, the title) navigate in place; where the host has URLs they are real links too.
  root.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-place]");
    if (!a || !root.contains(a) || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    const p = parsePlace(a.dataset.place);
    go(p.view === "list" ? null : p.li, p.pid, p.op, null, p.compiled || null);
  });
  function link(text, place) {
    return h("a", { href: host.link(place) || "#", "data-place": placeKey(place) }, text);
  }
  $("home").replaceWith(Object.assign(link("triton_trace", { view: "list" }), { id: "home" }));

  // route(place) shows a place, its panels as it names them; ``followed``: a click inside the viewer, whose
  // place carries the panels as they are (they follow the new program and tensor by themselves).
  async function route(r, followed = false) {
    S.routing++;
    try {
      await show(r, followed);
    } finally {
      S.routing--;
    }
    if (!S.routing && (storage.open || tiles.open)) places.moved();
  }

  async function show(r, followed) {
    const mine = ++S.routes;      // a newer navigation makes this one stale: it stops at its next await
    S.place = placeKey(r);
    clearError();
    if (!S.trace) {
      S.trace = await api("trace");
      if (!S.trace) return;
      // metric key -> label, in the server's order (a Map keeps it; JSON objects arrive key-sorted)
      S.labels = new Map(S.trace.metrics.key.map((k, i) => [k, S.trace.metrics.label[i]]));
      detail = new ProgramDetail($, S.trace.kinds, (seq, t0) => go(S.li, S.pid, seq, t0 === null ? null : { what: "op-click", t0 }), (seq) => {
        if (!S.pid) return;
        const o = detail.op(seq);
        const view = o && o.memory ? tensor.urlFor(S.pid, { seq, tensor: o.tensor }) : null;
        if (view) prefetch(view);
      }, (seq) => {
        const o = detail.op(seq);
        if (!o || !o.line) return;
        go(S.li, S.pid, seq, null, compiled.placeFor(S.launch.files[o.file], o.line));
        compiled.reveal();
      });
    }
    if (r.view === "list") { S.compiled = null; showList(); crumbs([]); return; }
    if (r.li >= S.trace.launches.kernel.length) { showError(`There is no launch ${r.li}; the trace has ${S.trace.launches.kernel.length}.`); showList(); return; }
    $("list-view").hidden = true;
    $("launch-view").hidden = false;
    if (S.li !== r.li) {
      busy(true);          // a launch switch: no panel of the old launch beside the new one's
      crumbs([[`#${r.li}`, null]]);
      const opened = await openLaunch(r.li);
      if (!opened) { busy(false); return; }
      if (mine !== S.routes) return;
      // findings first: a launch opened without a program opens on its worst finding
      if (!r.pid && !r.el && !r.storage && S.findings.kind.length) { selectFinding(0, S.pending); return; }
    }
    if (mine !== S.routes || S.li !== r.li) return;
    S.compiled = r.compiled || null;
    compiled.show(r.li, S.compiled);          // not awaited: a compile takes seconds, the rest goes on
    await selectProgram(r.pid, r.op, mine);
    if (mine !== S.routes) return;
    if (r.el) await tensor.showElement(r.el);
    else tensor.pin(null);
    if (!followed) await places.show(r);
    if (mine !== S.routes) return;
    const at = { view: "launch", li: r.li, pid: null, op: null, compiled: S.compiled };
    crumbs([[`#${r.li} ${S.launch.kernel}`, at], r.pid && [`program ${pidText(r.pid)}`, { ...at, pid: r.pid }],
            r.pid && r.op !== null && [`op ${r.op}`, null]].filter(Boolean));
    busy(false);
    finishPending();
  }

  function finishPending() {
    const p = S.pending;
    S.pending = null;
    if (!p) return;
    const dom = performance.now() - p.t0;
    requestAnimationFrame(() => setTimeout(() => {
      const entry = { what: p.what, dom, ms: performance.now() - p.t0 };
      window.ttPerf.push(entry);
      root.dispatchEvent(new CustomEvent("tt-updated", { detail: entry, bubbles: true }));
    }, 0));
  }

  function busy(on) {
    $("launch-view").setAttribute("aria-busy", String(on));
    $("loading").hidden = !on;
  }

  function crumbs(items) {
    const nav = clear($("crumbs"));
    nav.append(link("Launches", { view: "list" }));
    for (const [text, place] of items) nav.append(h("span", { class: "sep" }, "›"), place ? link(text, place) : h("span", {}, text));
  }

  function showList() {
    $("launch-view").hidden = true;
    $("list-view").hidden = false;
    const L = S.trace.launches, body = clear($("launches").querySelector("tbody"));
    const a = S.trace.analysis;
    $("analysis-note").textContent = a.available ? "" : `Findings and sector metrics are unavailable: ${a.error || "the analysis did not run"}.`;
    L.kernel.forEach((name, i) => {
      const state = L.completed[i] ? (L.skipped[i] ? `${L.skipped[i]} programs not recorded` : "complete") : `incomplete: ${L.error[i] || ""}`;
      const tr = h("tr", { "data-launch": i, tabindex: 0 },
        h("td", { class: "num" }, i), h("td", { class: "kernel" }, name), h("td", {}, L.grid[i].join(" × ")),
        h("td", { class: "num" }, fmtNum(L.programs[i])), h("td", { class: "num" }, fmtNum(L.ops[i])),
        h("td", { class: "num" }, L.findings[i] ? h("span", { class: "flag bad" }, L.findings[i]) : "0"),
        h("td", { class: "worst" }, L.worst ? L.worst[i] || "" : ""), h("td", { class: "num" }, L.efficiency && L.efficiency[i] !== null ? fmtPct(L.efficiency[i]) : "–"),
        h("td", {}, L.bound ? L.bound[i] || "–" : "–"), h("td", {}, state));
      tr.addEventListener("click", () => go(i, null, null));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") go(i, null, null); });
      body.append(tr);
    });
    if (S.trace.total_launches > L.kernel.length) {
      body.append(h("tr", {}, h("td", { colspan: 10, class: "muted" }, `… and ${fmtNum(S.trace.total_launches - L.kernel.length)} more launches, not listed`)));
    }
    if (!L.kernel.length) body.append(h("tr", {}, h("td", { colspan: 10, class: "muted" }, "The trace is empty: run a kernel decorated with @triton_trace.trace first.")));
    status(`${L.kernel.length} launch(es)`);
    root.dataset.view = "list";
  }

  async function openLaunch(li) {
    status("loading…");
    // the precision column is the source view's extra, not a reason to fail the launch: its errors stay in it
    const precision = host.request(url("precision", { i: li }));
    const [launch, gridData, found] = await Promise.all([api("launch", { i: li }), api("grid", { i: li, z: 0 }), api("findings", { i: li })]);
    if (!launch || !gridData || !found) return false;
    Object.assign(S, { li, launch, findings: found, z: 0, pid: null, op: null, program: null, finding: null });
    document.title = `${launch.kernel} · triton_trace`;
    if (!S.metricChosen) S.metric = telling(gridData, labels_(), found.kind.length > 0);
    const labels = S.labels;
    const msel = clear($("metric"));
    for (const [k, label] of labels) msel.append(h("option", { value: k }, label));
    msel.value = S.metric;
    grid.metric = S.metric;
    grid.selected = null;
    grid.marks = null;
    grid.set(gridData, labels);
    const zs = clear($("z"));
    for (let z = 0; z < launch.grid[2]; z++) zs.append(h("option", { value: z }, z));
    $("z-label").hidden = launch.grid[2] <= 1;
    summary(launch);
    detail.setLaunch(launch);
    source.set(launch, found);
    source.mark([], null);
    const drawn = source.lines;
    precision.then((res) => { if (source.lines === drawn) precisionColumn.show(drawn, res); });
    findings.set(found, S.trace.analysis.available ? null : "No analysis ran, so there are no findings.", launch.hints);
    card.set(found, launch);
    tensor.compare = S.trace.compare && S.trace.compare.available && li < S.trace.compare.launches;
    tensor.setLaunch(launch, li);
    storage.setLaunch(li);
    tiles.setLaunch(launch, li);
    comparison.show(li, Boolean(tensor.compare), labels);        // not awaited: it analyses the other trace
    status(`${launch.kernel} · ${launch.recorded_programs} programs`);
    root.dataset.view = "launch";
    delete $("charts-panel").dataset.ready;
    // plotly is big: load the charts after the grid and the rest of the page have painted
    idle(() => charts.load(li, labels));
    return true;
  }
  const labels_ = () => S.labels;

  function summary(L) {
    const m = L.metrics || {};
    const box = clear($("summary"));
    const stat = (label, value) => h("span", { class: "stat" }, h("b", {}, value), h("span", {}, label));
    box.append(h("span", { class: "title" }, L.kernel), stat("grid", L.grid.join(" × ")),
      stat("programs", fmtNum(L.recorded_programs) + (L.skipped_programs ? ` (+${fmtNum(L.skipped_programs)} not recorded)` : "")),
      stat("loaded", fmtBytes(m.load_bytes ?? sum(L.tensors.load_bytes))), stat("stored", fmtBytes(m.store_bytes ?? sum(L.tensors.store_bytes))));
    if (m.sector_efficiency !== undefined) box.append(stat("sector efficiency", fmtPct(m.sector_efficiency)));
    if (m.dram_bytes_predicted !== undefined) box.append(stat("DRAM bytes (predicted)", fmtBytes(m.dram_bytes_predicted)));
    if (m.flops !== undefined) box.append(stat("FLOPs", fmtNum(m.flops)));
    if (m.arithmetic_intensity !== undefined && m.arithmetic_intensity !== null) box.append(stat("FLOP/byte", fmtSig(m.arithmetic_intensity)));
    box.append(stat("findings", String(L.findings)));
    if (!L.completed) box.append(h("span", { class: "flag bad" }, `incomplete: ${L.error || "a program failed"}`));
    if (L.values_truncated) box.append(h("span", { class: "flag" }, "values truncated (the value cap was hit)"));
    if (L.analysis_error) box.append(h("span", { class: "flag" }, L.analysis_error));
    for (const note of L.checks_skipped || []) box.append(h("span", { class: "flag", title: "sanitizer checks not run" }, `not checked: ${note}`));
    const args = Object.entries(L.args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
    if (args) box.append(h("span", { class: "muted args" }, args));
  }

  async function selectProgram(pid, op, mine) {
    const same = pid && S.pid && pid.join() === S.pid.join();
    if (!pid) {
      S.pid = null; S.op = null; S.program = null; grid.selected = null; grid.draw();
      detail.clear();
      block.select(S.li, null, null);
      source.mark([], null);
      tiles.select(null);
      await tensor.select(null, null);
      return;
    }
    const [gx, gy, gz] = S.launch.grid;
    if (pid[0] >= gx || pid[1] >= gy || pid[2] >= gz) {
      showError(`Program ${pidText(pid)} is outside the grid ${gx}×${gy}×${gz}.`);
      return;
    }
    // a program's ops come in pages; the page must hold the op asked for
    const page = S.trace.limits.ops_per_page, offset = op !== null ? Math.floor(op / page) * page : 0;
    let tensorDone = null;
    if (!same || S.program.offset !== offset) {
      if (pid[2] !== S.z) await setZ(pid[2]);
      grid.selected = linearOf(pid, S.launch.grid);
      grid.draw();
      const programReq = api("program", { i: S.li, pid, offset: offset || null });
      // without an op, the tensor view needs nothing from the program payload: fetch both at once
      if (op === null) tensorDone = tensor.select(pid, null);
      const data = await programReq;
      if (!data || mine !== S.routes) return;
      S.program = data;
      S.pid = pid;
      detail.set(data, S.labels);
      tiles.select(pid);       // not awaited: it draws when its answer comes
    }
    S.op = op;
    const o = op !== null ? detail.op(op) : null;
    if (op !== null && !o) showError(`Program ${pidText(pid)} has no op ${op}.`);
    detail.highlight(op);
    source.mark(S.program.ops.line, S.focusLine || (o ? o.line : null));
    block.select(S.li, pid, o && o.memory ? op : null);
    await (tensorDone || tensor.select(pid, o && o.memory ? { seq: op, tensor: o.tensor } : null));
  }

  async function setZ(z) {
    const data = await api("grid", { i: S.li, z });
    if (!data) return;
    S.z = z;
    $("z").value = String(z);
    grid.set(data, S.labels);
  }

  $("metric").addEventListener("change", (e) => {
    S.metric = e.target.value;
    S.metricChosen = true;
    grid.metric = S.metric;
    grid.draw();
    idle(() => charts.setMetric(S.metric));    // the histogram follows once the grid has painted
  });
  $("z").addEventListener("change", (e) => setZ(Number(e.target.value)));
  host.keys.addEventListener("keydown", (e) => {
    if (!S.program || e.target.closest("input, select") || !["ArrowDown", "ArrowUp", "j", "k"].includes(e.key)) return;
    const n = S.program.total_ops;
    if (!n) return;
    const cur = S.op === null ? -1 : S.op;
    const next = Math.max(0, Math.min(n - 1, cur + (e.key === "ArrowDown" || e.key === "j" ? 1 : -1)));
    e.preventDefault();
    go(S.li, S.pid, next, { what: "key", t0: e.timeStamp });
  });

  // host.download(path, filename) -> Promise<{error?}>: the page has one; a notebook output has no server
  $("tensor-npy").hidden = !host.download;
  $("tensor-npy").addEventListener("click", async () => {
    const d = tensor.data;
    if (!d || !host.download) return;
    const name = `${S.launch.kernel}_${d.name}_${d.selection.mode}.npy`.replace(/[^\w.-]+/g, "_");
    const res = await host.download(url("values_npy", { i: S.li, t: d.tensor, mode: d.selection.mode,
      program: d.selection.program, op: d.selection.op }), name);
    if (res.error) showError(res.error);
  });

  installNavigation($, host.keys, {
    program: (pid) => { if (S.li !== null) go(S.li, pid, null, null); },
    trip: (d) => tiles.stepBy(d),
    finding: (d) => { if (S.findings && S.findings.kind.length) card.step(d); },
    error: showError,
  });

  // route(place) shows a place; current() is the one shown (its key), so a host can skip repeats.
  return { route, current: () => S.place };
}
