// Program detail (its ops in order), the kernel source with per-line margin metrics, and findings.
import { clear, fmtNum, h, pidText, scrollIntoBox } from "./dom.js";
import { fmtBytes, fmtMetric, fmtPct, place } from "./units.js";

export class ProgramDetail {
  // onOp(seq, t0): an op was clicked; onCompiled(seq): its "IR" link was (open the Compiled panel at its line)
  constructor($, kinds, onOp, onHover, onCompiled) {
    this.$ = $;
    this.kinds = kinds;
    this.onOp = onOp;
    this.data = null;
    this.rows = [];
    const body = this.$("ops").querySelector("tbody");
    body.addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (!tr || tr.dataset.seq === undefined) return;
      if (e.target.closest(".ir-link")) onCompiled(Number(tr.dataset.seq));
      else this.onOp(Number(tr.dataset.seq), e.timeStamp);
    });
    body.addEventListener("mouseover", (e) => {
      const tr = e.target.closest("tr");
      if (tr && tr.dataset.seq !== undefined && tr !== this.hovered) { this.hovered = tr; onHover(Number(tr.dataset.seq)); }
    });
  }

  setLaunch(launch) { this.launch = launch; this.clear(); }

  // No program selected (a new launch, or Back from a program to its launch): no rows of the last one.
  clear() {
    this.data = null;
    this.rows = [];
    this.hovered = null;
    clear(this.$("ops").querySelector("tbody")).append(h("tr", {}, h("td", { colspan: 11, class: "muted" }, "Click a program in the grid.")));
    this.$("ops-pager").hidden = true;
    this.$("program-title").textContent = "Program";
    this.$("program-metrics").textContent = "";
  }

  set(data, metricLabels) {
    this.data = data;
    const o = data.ops, names = this.launch.tensors.name, files = this.launch.files, src = this.launch.source.file;
    this.$("program-title").textContent = `Program ${pidText(data.program)}`;
    const m = data.metrics;
    this.$("program-metrics").textContent = ["load_bytes", "store_bytes", "masked_share", "sector_efficiency"]
      .map((k) => `${metricLabels.get(k) || k} ${fmtMetric(k, m[k])}`).join(" · ");
    this.pager(data);
    const body = this.$("ops").querySelector("tbody");
    const frag = document.createDocumentFragment();
    this.rows = [];
    for (let i = 0; i < o.seq.length; i++) {
      const kind = this.kinds[o.kind[i]] || "?";
      const mem = o.kind[i] < 10;
      const cls = [mem ? "" : "compute", o.oob[i] ? "oob" : ""].join(" ").trim();
      const line = o.line[i] ? (files[o.file[i]] === src ? String(o.line[i]) : place(files[o.file[i]], o.line[i])) : "–";
      const kcls = "kind " + (kind.startsWith("atomic") ? "atomic" : kind);
      const tr = h("tr", { "data-seq": o.seq[i], class: cls || null },
        h("td", { class: "num" }, o.seq[i]), h("td", { class: kcls }, kind),
        h("td", { title: o.tensor[i] >= 0 ? names[o.tensor[i]] : null }, o.tensor[i] >= 0 ? names[o.tensor[i]] : kind === "dot" ? `${o.aux[i][0]}×${o.aux[i][1]}×${o.aux[i][2]}` : ""),
        h("td", { class: "num" }, line, mem && o.tensor[i] >= 0 && o.line[i]
          ? h("button", { type: "button", class: "ir-link", title: "this line compiled: the Compiled panel" }, "IR") : null),
        h("td", {}, o.shape[i] || "–"),
        h("td", { class: "num" }, mem ? `${o.active[i]}/${o.lanes[i]}` : ""),
        h("td", { class: "num" }, mem ? fmtBytes(o.bytes[i]) : ""),
        h("td", { class: "num", title: mem && o.sector_efficiency[i] !== null ? `sector efficiency ${fmtPct(o.sector_efficiency[i])}` : null },
          mem && o.sectors[i] !== null ? String(o.sectors[i]) : ""),
        h("td", { class: "num" }, mem ? fmtPct(o.sector_efficiency[i]) : ""),
        h("td", { class: "num" }, mem && o.oob[i] ? String(o.oob[i]) : ""), valuesCell(o, i));
      this.rows.push(tr);
      frag.append(tr);
    }
    clear(body).append(frag);
    if (o.seq.length === 0) body.append(h("tr", {}, h("td", { colspan: 11, class: "muted" }, "This program recorded no ops.")));
  }

  // Long programs (a loop of many iterations) come in pages of ops.
  pager(data) {
    const box = clear(this.$("ops-pager"));
    box.hidden = data.total_ops <= data.limit;
    if (box.hidden) return;
    const last = Math.min(data.total_ops, data.offset + data.limit) - 1;
    const step = (to, text) => {
      const b = h("button", { type: "button", class: "toggle", disabled: to === null }, text);
      b.addEventListener("click", () => this.onOp(to, null));
      return b;
    };
    box.append(step(data.offset > 0 ? data.offset - data.limit : null, "‹ earlier"),
      h("span", {}, `ops ${data.offset}–${last} of ${data.total_ops}`),
      step(last + 1 < data.total_ops ? last + 1 : null, "later ›"));
  }

  // The op at position seq: {seq, kind, tensor, line, file, memory}
  op(seq) {
    const o = this.data && this.data.ops;
    if (!o) return null;
    const i = seq - this.data.offset;
    if (i < 0 || i >= o.seq.length) return null;
    return { seq, kind: o.kind[i], tensor: o.tensor[i], line: o.line[i], file: o.file[i], memory: o.kind[i] < 10 && o.tensor[i] >= 0 };
  }

  highlight(seq) {
    for (const tr of this.rows) tr.classList.toggle("sel", Number(tr.dataset.seq) === seq);
    const row = this.rows.find((tr) => Number(tr.dataset.seq) === seq);
    if (row) scrollIntoBox(row);
  }
}

// An op's values over its active lanes: the finite range, and NaN / Inf counts flagged. A math row's are its
// float ops' results in this program (every lane): the first non-finite one in the title, and "born here"
// where a NaN/Inf that reached memory was born on its line.
function valuesCell(o, i) {
  const results = o.results ? o.results[i] : 0;
  if (results === 2) return h("td", { class: "vals muted", title: "this program's values on the line were left out: the recorder keeps 65536 (program, line) entries per launch" }, "not kept");
  if (!o.vmin || o.nan[i] === -1 || o.nan[i] === undefined) return h("td", { class: "vals muted" }, "");
  const parts = [];
  if (o.vmin[i] !== null) parts.push(o.vmin[i] === o.vmax[i] ? fmtNum(o.vmin[i]) : `${fmtNum(o.vmin[i])} … ${fmtNum(o.vmax[i])}`);
  let title = o.vmean[i] !== null ? `min ${fmtNum(o.vmin[i])} · max ${fmtNum(o.vmax[i])} · mean ${fmtNum(o.vmean[i])}` : "no finite value";
  if (results === 1) title = `values from the ops' results · ${o.vmin[i] !== null ? `min ${fmtNum(o.vmin[i])} · max ${fmtNum(o.vmax[i])}` : "no finite value"}`;
  const first = results === 1 && o.first ? o.first[i] : null;
  if (first) title += ` · first non-finite: ${first.value} in ${first.op || "an op"} at lane (${first.lane.join(", ")})`;
  const td = h("td", { class: "vals" + (results === 1 ? " results" : ""), title: `${title} · NaN ${o.nan[i]} · Inf ${o.inf[i]}` }, parts.join(""));
  if (o.nan[i]) td.append(h("span", { class: "flag bad" }, `${o.nan[i]} NaN`));
  if (o.inf[i]) td.append(h("span", { class: "flag bad" }, `${o.inf[i]} Inf`));
  if (o.born && o.born[i]) td.append(h("span", { class: "flag bad born" }, "born here"));
  return td;
}

export class SourceView {
  constructor($) { this.$ = $; }

  set(launch, findings) {
    const s = launch.source, box = clear(this.$("source"));
    this.$("source-file").textContent = s.file ? place(s.file) : "source not recorded";
    this.$("source-file").title = s.file || "";
    const margin = new Map(s.margin.line.map((ln, i) => [ln, i]));
    const flagged = new Set(findings.line.filter((x) => x !== null));
    this.lines = new Map();
    const frag = document.createDocumentFragment();
    s.lines.forEach((text, k) => {
      const ln = s.first_line + k, mi = margin.get(ln);
      const m = mi === undefined ? "" : fmtBytes(s.margin.bytes[mi]);
      let title = null;
      if (mi !== undefined) {
        const M = s.margin, parts = [`all programs: ${fmtBytes(M.bytes[mi])} moved`];
        if (M.sectors[mi] !== null) parts.push(`${M.sectors[mi]} sectors`, `sector efficiency ${fmtPct(M.sector_efficiency[mi])}`);
        if (M.findings[mi]) parts.push(`${M.findings[mi]} finding(s)`);
        title = parts.join(" · ");
        if (M.findings[mi]) flagged.add(ln);
      }
      const div = h("div", { class: "src-line" + (mi === undefined ? "" : " has-ops") + (flagged.has(ln) ? " finding" : ""), "data-line": ln, title },
        h("span", { class: "m" }, m), h("span", { class: "n" }, ln), h("span", { class: "t" }, text));
      this.lines.set(ln, div);
      frag.append(div);
    });
    box.append(frag);
    if (s.truncated) box.append(h("div", { class: "muted" }, "… source truncated"));
    if (!s.lines.length) box.append(h("div", { class: "muted" }, "The kernel's source was not recorded."));
    this.cur = null;
    this.prog = [];
  }

  // Mark the lines the selected program executes, and the current op's line.
  mark(programLines, line) {
    for (const el of this.prog) el.classList.remove("prog");
    this.prog = [];
    for (const ln of programLines) { const el = this.lines.get(ln); if (el) { el.classList.add("prog"); this.prog.push(el); } }
    if (this.cur) this.cur.classList.remove("cur");
    this.cur = line ? this.lines.get(line) || null : null;
    if (this.cur) { this.cur.classList.add("cur"); scrollIntoBox(this.cur); }
    this.$("source").dataset.current = line ? String(line) : "";
  }
}

export class FindingsList {
  constructor($, onPick, onHint) {
    this.$ = $;
    this.onHint = onHint;
    this.onPick = onPick;
    const pick = (e) => {
      const li = e.target.closest("li");
      if (li && li.dataset.k !== undefined) this.onPick(Number(li.dataset.k), e.timeStamp);
      else if (li && li.dataset.hint !== undefined) this.onHint(this.hints[Number(li.dataset.hint)]);
    };
    this.$("findings").addEventListener("click", pick);
    this.$("findings").addEventListener("keydown", (e) => { if (e.key === "Enter") pick(e); });
  }

  set(f, note, hints) {
    this.f = f;
    this.hints = hints || [];
    const box = clear(this.$("findings"));
    this.$("findings-count").textContent = f.total ? `${f.total}${f.truncated ? ` (showing ${f.kind.length})` : ""}` : "";
    if (f.suppressed) this.$("findings-count").textContent += ` · ${f.suppressed} more suppressed by the analysis cap`;
    if (!f.kind.length) box.append(h("li", { class: "muted empty" }, note || "No findings for this launch."));
    this.hints.forEach((x, k) => box.append(h("li", { "data-hint": k, tabindex: 0, class: "hint" },
      h("span", { class: "fk" }, `hint: ${x.kind.replace("_", " ")}`), h("span", { class: "fm" }, x.message),
      h("span", { class: "fl" }, `${x.effect} · line ${x.line}`))));
    if (!f.kind.length) return;
    const frag = document.createDocumentFragment();
    f.kind.forEach((kind, k) => {
      const where = [f.program[k] ? `program ${pidText(f.program[k])}` : null, f.op[k] !== null ? `op ${f.op[k]}` : null,
                     f.line[k] ? `line ${f.line[k]}` : null, f.tensor[k] ? `tensor ${f.tensor[k]}` : null].filter(Boolean).join(" · ");
      frag.append(h("li", { "data-k": k, tabindex: 0, class: f.severity[k] || null },
        h("span", { class: "fk" }, kind), f.severity[k] ? h("span", { class: "sev" }, f.severity[k]) : null,
        h("span", { class: "fm" }, f.message[k]), h("span", { class: "fl" }, where)));
    });
    box.append(frag);
  }

  highlight(k) { for (const li of this.$("findings").children) li.classList.toggle("sel", Number(li.dataset.k) === k); }
}
