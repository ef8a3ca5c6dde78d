// The Compiled panel: the open launch's kernel compiled for a GPU target on the server's CPU
// (the "compiled" route, triton_trace/view/compiledview.py): its resources, its global memory
// ops as compiled, and its source beside one IR stage, linked line to line both ways. A compile takes
// seconds, so the payload is asked for only once the panel is opened.
import { clear, h, scrollIntoBox } from "./dom.js";
import { fmtBytes, fmtPct, place } from "./units.js";

export const STAGES = ["ttir", "ttgir", "ptx"];
const STAGE_LABEL = { ttir: "TTIR", ttgir: "TTGIR", ptx: "PTX" };
// the target a notebook output carries: routes.py's DEFAULT_TARGET (tests/view/test_routes.py checks they agree)
export const DEFAULT_TARGET = "sm_90";
const LAYOUT_FIELDS = ["sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"];
const PART = /^\/compiled(?:\/(sm_\d+))?(?:\/(ttir|ttgir|ptx))?(?:\/line\/(?:(\d+):)?(\d+))?$/;

// The panel's place: {target, stage, file, line, name}. `file` indexes the payload's `files` and `name`
// (a file name, from a link outside the panel, which does not know the payload) wins over it; without
// either, a line is the kernel's, else the first helper's that holds it. In the URL: the part after the
// program, "/compiled/sm_90/ttgir/line/0:91"; `name` stays out of it.
export function compiledKey(c) {
  if (!c) return "";
  let key = `/compiled/${c.target}/${c.stage}`;
  if (c.line) key += `/line/${c.file !== null && c.file !== undefined ? c.file + ":" : ""}${c.line}`;
  return key;
}

// "/compiled..." -> a place; "" -> null (the panel closed); anything else -> undefined (not a place).
export function parseCompiled(text) {
  if (!text) return null;
  const m = text.match(PART);
  if (!m) return undefined;
  return { target: m[1] || DEFAULT_TARGET, stage: m[2] || "ttgir", file: m[3] !== undefined ? Number(m[3]) : null,
           line: m[4] !== undefined ? Number(m[4]) : null, name: null };
}

export class CompiledPanel {
  // request: the host's, by route (route, values) -> Promise<{body} | {error}>; nav(place): show the launch with the panel at
  // `place` (null closes it), so the URL and Back / Forward follow the panel like the other views
  constructor($, request, nav) {
    this.$ = $;
    this.request = request;
    this.nav = nav;
    this.li = null;
    this.place = null;      // shown, or null (closed)
    this.last = null;       // the last place shown, to reopen at
    this.key = null;        // launch|target of the payload shown or asked for
    this.data = null;
    this.targets = [];
    this.keepIr = null;     // the IR line just clicked: it stays where it is, not scrolled to
    $("compiled-open").addEventListener("click", () => this.nav(this.place ? null : { ...(this.last || this.fresh()), line: null, file: null, name: null }));
    $("compiled-target").addEventListener("change", (e) => this.nav({ ...this.place, target: e.target.value, name: this.selectedName() }));
    $("compiled-stage").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-stage]");
      if (b && this.place) this.nav({ ...this.place, stage: b.dataset.stage, name: this.selectedName() });
    });
    $("compiled-source").addEventListener("click", (e) => {
      const row = e.target.closest(".cl-src");
      if (row) this.pick(Number(row.dataset.file), Number(row.dataset.line));
    });
    $("compiled-ir").addEventListener("click", (e) => {
      const row = e.target.closest(".ir-line");
      if (row) this.pickIr(Number(row.dataset.i));
    });
    $("compiled-ops").querySelector("tbody").addEventListener("click", (e) => {
      const tr = e.target.closest("tr[data-k]");
      if (tr && this.data) { const o = this.data.ops[Number(tr.dataset.k)]; if (o.line) this.pick(o.file, o.line); }
    });
  }

  fresh() { return { target: DEFAULT_TARGET, stage: "ttgir", file: null, line: null, name: null }; }

  // The place a link from elsewhere (an op of the program view) opens: its source line, on the target and
  // stage shown last.
  placeFor(fileName, line) {
    const c = { ...(this.place || this.last || this.fresh()), file: null, line: line || null, name: fileName || null };
    const f = this.data && fileName ? this.data.files.indexOf(fileName) : -1;
    return f >= 0 ? { ...c, file: f, name: null } : c;
  }

  pick(file, line) { this.nav({ ...this.place, file, line, name: null }); }

  pickIr(i) {
    const src = this.data.stages[this.place.stage].src[i];
    this.keepIr = i;
    if (src) this.pick(src[0], src[1]);
    else this.select(null);                              // a line of no source line: itself only
    this.markIr(i);
  }

  selectedName() { return this.sel && this.data ? this.data.files[this.sel[0]] : null; }

  setLaunch(li) {
    this.li = li;
    this.key = null;
    this.data = null;
    this.place = null;
    this.last = null;
    this.state("closed");
    this.$("compiled-body").hidden = true;
  }

  state(s) { this.$("compiled-panel").dataset.state = s; }

  // Show `place` (null: closed) for launch li; the payload is asked for once per launch and target.
  show(li, place) {
    if (li !== this.li) this.setLaunch(li);
    this.place = place;
    const open = !!place, panel = this.$("compiled-panel");
    const btn = this.$("compiled-open");
    btn.textContent = open ? "Hide" : "Show";
    btn.setAttribute("aria-pressed", String(open));
    this.$("compiled-controls").hidden = !open;
    this.$("compiled-body").hidden = !open;
    if (!open) {          // reopening asks again: the host keeps the answer, and a late one finds no panel to fill
      this.key = null;
      this.data = null;
      this.state("closed");
      this.$("compiled-status").textContent = "";
      return;
    }
    this.last = place;
    panel.dataset.target = place.target;
    panel.dataset.stage = place.stage;
    this.targetOptions(place.target);
    for (const b of this.$("compiled-stage").querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.stage === place.stage));
    const key = `${li}|${place.target}`;
    if (key !== this.key) {
      this.key = key;
      this.data = null;
      this.stage = null;
      this.state("loading");
      this.$("compiled-status").textContent = `compiling for ${place.target}…`;
      this.$("compiled-error").hidden = true;
      this.$("compiled-main").hidden = true;
      this.request("compiled", { i: li, target: place.target }).then((res) => {
        if (this.key !== key) return;            // another launch or target was asked for meanwhile
        this.applied = null;
        if (this.render(res)) this.apply();
      });
      return;
    }
    // a route that leaves the panel's place as it was (a program picked) leaves its scrolling alone too
    if (this.data && this.applied !== placeSig(place)) this.apply();
    this.keepIr = null;
  }

  // The payload's parts that do not depend on the stage or the selection; false for an error.
  render(res) {
    const msg = res.error || (res.body && res.body.error);
    this.$("compiled-status").textContent = "";
    if (res.body && res.body.targets) this.targets = res.body.targets;
    this.targetOptions(this.place.target);
    if (msg) {
      this.state("error");
      const box = this.$("compiled-error");
      box.textContent = res.error ? msg : `The kernel did not compile for ${res.body.target}: ${msg}`;
      box.hidden = false;
      return false;
    }
    const d = res.body;
    this.data = d;
    this.$("compiled-main").hidden = false;
    this.$("compiled-resources").textContent = [resourcesText(d.resources), ...(d.dots || []).map(dotText)].join(" · ");
    const piped = pipelineText(d.pipelines || [], d.resources.num_stages);
    this.$("compiled-pipeline").textContent = piped;
    this.$("compiled-pipeline").hidden = !piped;
    this.sourceRows(d);
    this.opRows(d);
    return true;
  }

  targetOptions(target) {
    const sel = this.$("compiled-target"), names = this.targets.includes(target) ? this.targets : [...this.targets, target];
    if ([...sel.options].map((o) => o.value).join() !== names.join()) {
      clear(sel).append(...names.map((t) => h("option", { value: t }, t)));
    }
    sel.value = target;
  }

  sourceRows(d) {
    const box = clear(this.$("compiled-source")), frag = document.createDocumentFragment();
    this.srcRows = new Map();          // "file:line" -> row
    d.source.forEach((fn, k) => {
      const file = d.files[fn.file];
      frag.append(h("div", { class: "fn-head", title: file }, `${place(file)} · ${k ? "helper" : "kernel"}`));
      fn.lines.forEach((text, j) => {
        const line = fn.first_line + j, key = `${fn.file}:${line}`;
        const row = h("div", { class: "cl-src", "data-file": fn.file, "data-line": line },
          h("span", { class: "n" }, line), h("span", { class: "t" }, text));
        if (!this.srcRows.has(key)) this.srcRows.set(key, row);
        frag.append(row);
      });
    });
    if (!d.source.length) frag.append(h("div", { class: "muted" }, "The kernel's source was not recorded."));
    box.append(frag);
  }

  opRows(d) {
    const body = clear(this.$("compiled-ops").querySelector("tbody")), kernelFile = d.source.length ? d.source[0].file : null;
    this.opTr = d.ops.map((o, k) => {
      const where = !o.line ? "–" : o.file === kernelFile ? String(o.line) : place(d.files[o.file], o.line);
      const text = this.lineText(o.file, o.line);
      const tr = h("tr", { "data-k": k, class: `dir-${o.direction}` },
        h("td", { class: "num", title: o.file !== null ? d.files[o.file] : null }, where),
        h("td", { class: "code", title: text }, text === null ? "–" : text.trim()),
        h("td", { class: "kind" }, o.op), h("td", { class: "kind", "data-pipeline": o.pipeline || null,
          title: o.pipeline ? PIPELINE_PART[o.pipeline][1] : null }, o.instruction, o.pipeline ? h("span", { class: "pipe" }, PIPELINE_PART[o.pipeline][0]) : null),
        h("td", { class: "num" }, o.vector_bytes ? `${o.vector_bytes} B` : "–"),
        h("td", { class: "code layout", title: layoutText(o.layout) }, layoutText(o.layout)),
        h("td", {}, o.shape.length ? o.shape.join("×") : "scalar"), h("td", {}, o.element || "–"));
      body.append(tr);
      return tr;
    });
    if (!d.ops.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "The compiled kernel has no global memory ops.")));
  }

  // The text of a source line, from the functions the payload carries; null where it has not got it.
  lineText(file, line) {
    const row = this.srcRows.get(`${file}:${line}`);
    return row ? row.lastChild.textContent : null;
  }

  apply() {
    const c = this.place;
    this.applied = placeSig(c);
    if (this.stage !== c.stage) this.stageRows(c.stage);
    this.select(this.resolve(c));
    if (this.keepIr !== null) this.markIr(this.keepIr);
    this.keepIr = null;
    this.state("ready");
  }

  stageRows(stage) {
    const d = this.data, st = d.stages[stage], frag = document.createDocumentFragment();
    this.stage = stage;
    this.bySrc = new Map();            // "file:line" -> IR line indices
    this.irRows = st.lines.map((text, i) => {
      const s = st.src[i], key = s ? `${s[0]}:${s[1]}` : null;
      if (key) { if (!this.bySrc.has(key)) this.bySrc.set(key, []); this.bySrc.get(key).push(i); }
      const row = h("div", { class: "ir-line" + (s ? " has-src" : ""), "data-i": i },
        h("span", { class: "n" }, i + 1),
        h("span", { class: "loc", title: s ? d.files[s[0]] : null }, s ? place(d.files[s[0]], s[1]) : ""),
        h("span", { class: "t" }, text));
      frag.append(row);
      return row;
    });
    clear(this.$("compiled-ir")).append(frag);
    this.$("compiled-ir").dataset.stage = stage;
    this.$("compiled-ir-note").textContent = st.truncated
      ? `${STAGE_LABEL[stage]}: the first ${st.lines.length.toLocaleString("en-US")} of ${st.total.toLocaleString("en-US")} lines (truncated)`
      : `${STAGE_LABEL[stage]}: ${st.total.toLocaleString("en-US")} lines`;
    for (const [key, row] of this.srcRows) row.classList.toggle("has-ir", this.bySrc.has(key));
    this.hl = [];
    this.cur = null;
  }

  // [file, line] of the place's selection in this payload, or null.
  resolve(c) {
    if (!c.line) return null;
    const d = this.data, named = c.name ? d.files.indexOf(c.name) : -1;
    if (named >= 0) return [named, c.line];
    if (c.file !== null && c.file !== undefined && c.file < d.files.length) return [c.file, c.line];
    const fn = d.source.find((s) => c.line >= s.first_line && c.line < s.first_line + s.lines.length);
    return fn ? [fn.file, c.line] : null;
  }

  // Highlight the source line `sel` ([file, line] or null), every IR line of it and its memory ops.
  select(sel) {
    this.sel = sel;
    const key = sel ? `${sel[0]}:${sel[1]}` : null, ir = key ? this.bySrc.get(key) || [] : [];
    for (const row of this.hl) row.classList.remove("hl");
    this.hl = ir.map((i) => this.irRows[i]);
    for (const row of this.hl) row.classList.add("hl");
    if (this.curSrc) this.curSrc.classList.remove("cur");
    this.curSrc = key ? this.srcRows.get(key) || null : null;
    if (this.curSrc) { this.curSrc.classList.add("cur"); scrollIntoBox(this.curSrc); }
    this.data.ops.forEach((o, k) => this.opTr[k].classList.toggle("sel", !!sel && o.file === sel[0] && o.line === sel[1]));
    this.markIr(null);
    if (this.hl.length && !(this.keepIr !== null && ir.includes(this.keepIr))) scrollIntoBox(this.hl[0]);
    this.$("compiled-ir").dataset.selected = key || "";
    this.$("compiled-status").textContent = sel
      ? `line ${sel[1]}${sel[0] === this.data.source[0]?.file ? "" : ` of ${place(this.data.files[sel[0]])}`}: ${ir.length} ${STAGE_LABEL[this.stage]} line(s)`
      : "click a source line, an IR line or a memory op";
  }

  markIr(i) {
    if (this.cur) this.cur.classList.remove("cur");
    this.cur = i !== null ? this.irRows[i] || null : null;
    if (this.cur) this.cur.classList.add("cur");
  }

  // Bring the panel into the page's view (opened from another panel).
  reveal() { requestAnimationFrame(() => this.$("compiled-panel").scrollIntoView({ block: "start", behavior: "instant" })); }
}

function placeSig(c) { return `${compiledKey(c)}|${c.name || ""}`; }

// "4 warps · 3 stages · 0 B shared memory · 10 registers per thread · no spills · occupancy 100% (16 programs,
// 64 warps per SM), limited by warps · Triton 3.9.0"
export function resourcesText(r) {
  const o = r.occupancy || {};
  return [`${r.num_warps} warps`, `${r.num_stages} stages`, `${fmtBytes(r.shared_bytes)} shared memory`,
    r.registers === null || r.registers === undefined ? "registers unknown" : `${r.registers} registers per thread`,
    r.spill_bytes === null || r.spill_bytes === undefined ? "spills unknown" : r.spill_bytes ? `${fmtBytes(r.spill_bytes)} spilled per thread` : "no spills",
    o.occupancy === undefined ? "occupancy unknown"
      : `occupancy ${fmtPct(o.occupancy)} (${o.programs_per_sm} programs, ${o.warps_per_sm} warps per SM), limited by ${o.limited_by}`,
    `Triton ${r.triton}`].join(" · ");
}

// "tl.dot at line 48 → FMA (32 instructions: no tensor cores)": how the compiler lowered a dot.
const DOT_AS = { wgmma: "wgmma (Hopper warpgroup MMA)", mma: "mma.sync (tensor cores)", fma: "FMA: no tensor cores" };
export function dotText(x) {
  return `tl.dot at line ${x.line} → ` + (x.as ? `${DOT_AS[x.as]}, ${x.count} instruction(s)` : "no MMA or FMA found in its PTX lines");
}

// The part of a pipelined loop an async load belongs to: [label, what it means].
const PIPELINE_PART = {
  prologue: ["prologue", "issued before the loop: an early trip's tile, copied ahead while nothing waits for it yet"],
  steady: ["steady state", "issued inside the loop: each trip copies a later trip's tile, then waits for its own"],
  epilogue: ["epilogue", "issued after the loop (peeled): the last trips' tiles"],
};

// "Software pipelined, 3 stages: the loop at line 11 (TTGIR 95–132) copies the loads of lines 12 and 13 ahead:
// before the loop 2 async copies each (prologue), inside it 1 each (steady state); …": what pipeline.py found,
// or why nothing was pipelined.
export function pipelineText(loops, stages) {
  if (!loops.length) return stages > 1 ? `num_stages = ${stages}, but no loop's load became an async copy: nothing is software pipelined.` : "";
  return loops.map((p) => {
    const each = (k) => p.loads.map((x) => x[k]);
    // "2 async copies each", "1 async copy", "1 each", "2 / 3 async copies" (one count per load, in their order)
    const counts = (k, noun) => {
      const n = each(k), same = n.every((x) => x === n[0]), word = noun && (same && n[0] === 1 ? " async copy" : " async copies");
      return same ? `${n[0]}${word || ""}${p.loads.length > 1 ? " each" : ""}` : `${n.join(" / ")}${word || ""}`;
    };
    const lines = p.loads.map((x) => x.line).join(" and ");
    const epi = p.loads.some((x) => x.epilogue) ? `, after it ${counts("epilogue", false)} (epilogue, peeled)`
      : "; its last trips' copies are masked off" + (p.drain_line ? ` and the wait at TTGIR line ${p.drain_line} drains the rest (epilogue)` : " (epilogue)");
    return `Software pipelined, ${stages} stages: the loop at line ${p.line} (TTGIR ${p.ir_line}–${p.end_line}) copies the ` +
      `load${p.loads.length > 1 ? "s" : ""} of line${p.loads.length > 1 ? "s" : ""} ${lines} ahead: before the loop ` +
      `${counts("prologue", true)} (prologue), inside it ${counts("steady", false)} (steady state)${epi}.`;
  }).join(" ");
}

// "blocked sizePerThread=[1,4] threadsPerWarp=[4,8] warpsPerCTA=[4,1] order=[1,0]": the usual fields first.
export function layoutText(l) {
  if (!l) return "–";
  const keys = [...LAYOUT_FIELDS.filter((k) => k in l), ...Object.keys(l).filter((k) => !LAYOUT_FIELDS.includes(k) && k !== "kind" && k !== "name").sort()];
  const value = (v) => Array.isArray(v) ? `[${v.join(",")}]` : typeof v === "object" && v !== null ? JSON.stringify(v) : String(v);
  return [l.kind || l.name || "?", ...keys.map((k) => `${k}=${value(l[k])}`)].join(" ");
}
