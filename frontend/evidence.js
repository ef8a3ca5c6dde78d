// The finding card and a finding's evidence on the canvases. The card holds the whole path of one finding:
// its source line, the programs involved and the offending elements, each one click away; picking the
// finding itself selects all three at once (the page opens that way on the launch's worst finding).
// Where evidence is drawn: the tensor view outlines the offending elements (view indices from the findings
// payload, triton_trace/view/evidence.py) and draws out-of-bounds lanes in a halo past the tensor's ends at
// their would-be cells (the tensor payload's ``halo``); the grid rings every program involved (the findings
// payload's ``evidence.grid``: runs of program ids, a race's writers and readers apart), and the card's extent
// line says how far the finding reaches (the report's ``extent``, analysis/checks/extent.py).
import { clear, fmtNum, h, pidText } from "./dom.js";

export const OOB_RED = [220, 38, 38];
export const MARK_INK = "#111827";
// colour by writers: how many programs wrote an element (two or more without atomics is a race)
export const WRITERS = [[191, 219, 254], [100, 116, 139], [249, 115, 22], [185, 28, 28]];
export const writersColor = (n) => WRITERS[Math.min(3, Math.max(0, n | 0))];

// The cell of view index ``idx`` on a plane (PlanePayload), or null when the plane does not show it.
export function cellOf(pl, idx) {
  let row, col;
  if (pl.wrap) { row = Math.floor(idx[0] / pl.wrap); col = idx[0] % pl.wrap; }
  else {
    for (let d = 0; d < idx.length; d++) if (d !== pl.row_dim && d !== pl.col_dim && idx[d] !== pl.index[d]) return null;
    row = pl.row_dim !== null ? idx[pl.row_dim] : 0;
    col = idx.length ? idx[pl.col_dim] : 0;
  }
  const r = row - pl.origin[0], c = col - pl.origin[1];
  if (r < 0 || c < 0 || r >= pl.rows || c >= pl.cols) return null;
  return [Math.floor(r / pl.cell[0]), Math.floor(c / pl.cell[1])];
}

// Cells of margin the halo needs on each side of the plane: {top, left, bottom, right}.
export function haloMargin(pl, halo) {
  const m = { top: 0, left: 0, bottom: 0, right: 0 };
  if (!halo) return m;
  halo.row.forEach((r, k) => {
    const c = halo.col[k];
    m.top = Math.max(m.top, -r); m.left = Math.max(m.left, -c);
    m.bottom = Math.max(m.bottom, r - pl.cell_rows + 1); m.right = Math.max(m.right, c - pl.cell_cols + 1);
  });
  return m;
}

// Draw the halo (solid red cells with a dashed border) and rings around marked cells. ctx is translated
// so that cell (0, 0) of the plane is at the origin. Returns how many of each were drawn.
export function drawEvidence(ctx, px, halo, marks) {
  let nh = 0, nm = 0;
  if (halo) {
    ctx.fillStyle = `rgb(${OOB_RED.join(",")})`;
    ctx.strokeStyle = "#7f1d1d";
    ctx.lineWidth = 1;
    ctx.setLineDash([2, 2]);
    halo.row.forEach((r, k) => {
      const x = halo.col[k] * px, y = r * px;
      ctx.fillRect(x, y, px, px);
      if (px >= 6) ctx.strokeRect(x + 0.5, y + 0.5, px - 1, px - 1);
      nh++;
    });
    ctx.setLineDash([]);
  }
  for (const [r, c] of marks) {      // a dark ring inside the cell: its centre keeps the cell's colour
    const w = Math.max(1, Math.min(4, Math.floor(px / 6)));
    ctx.lineWidth = w;
    ctx.strokeStyle = MARK_INK;
    ctx.strokeRect(c * px + w / 2, r * px + w / 2, px - w, px - w);
    nm++;
  }
  return { halo: nh, marks: nm };
}

// What each finding kind shows on the tensor: all programs coloured by writers for a race (the conflict
// set is every element two programs wrote), values for a non-finite one, the op's own access otherwise.
const FOCUS = { race: { mode: "all", colour: "writers" }, nonfinite: { mode: null, colour: "value" },
                nonfinite_input: { mode: null, colour: "value" }, overflow: { mode: null, colour: "value" },
                int_division: { mode: null, colour: "value" }, padded_reduction: { mode: null, colour: "value" },
                lane_conflict: { mode: null, colour: "value" },
                // the stores a lock's release follows: every program's writes, the elements other programs
                // reach outlined (the programs the lock takes turns between write them: by writers)
                release_without_barrier: { mode: "all", colour: "writers" } };

// n and a noun, plural when n is not 1: "1 program", "16 programs"
const counted = (n, one, many = one + "s") => `${fmtNum(n)} ${n === 1 ? one : many}`;

// A program id as the card writes it: its x alone on a 1-D grid, (x, y, z) otherwise.
function pidShort(p, grid) {
  return grid && grid[1] === 1 && grid[2] === 1 ? String(p[0]) : pidText(p);
}

// Runs ([[first, last]]) as "a-b, c, …": the first ``max`` runs; "…" when there are more (``runs`` in all).
function spanText(ranges, runs, fmt = String, sep = "-", max = 4) {
  const text = ranges.slice(0, max).map(([a, b]) => (fmt(a) === fmt(b) ? fmt(a) : `${fmt(a)}${sep}${fmt(b)}`)).join(", ");
  return text + (runs > Math.min(max, ranges.length) ? ", …" : "");
}

// A list of programs ([x, y, z] each, ``count`` in all) as "0, 2, 4, …".
function pidList(pids, count, grid, max = 8) {
  const shown = pids.slice(0, max).map((p) => pidShort(p, grid));
  return shown.join(", ") + (count > shown.length ? ", …" : "");
}

// The extent of a finding (FindingsPayload.extent: the report's, analysis/report.py's schema) in parts the
// card shows on one line: [{part, text}], part one of programs, writers, readers, elements, past_end,
// before_start, mask, poisoned, inexact. ``grid``: the launch grid, for how program ids read.
function extentParts(x, grid) {
  const out = [], add = (part, text) => out.push({ part, text });
  if (!x) return out;
  const p = x.programs, el = x.elements;
  if (x.writers || x.readers) {
    for (const [part, one] of [["writers", "writer"], ["readers", "reader"]]) {
      const s = x[part];
      if (s && (s.count || part === "writers")) add(part, counted(s.count, one) + (s.count ? `: ${pidList(s.programs || [], s.count, grid)}` : ""));
    }
  } else if (p && p.count) {
    add("programs", counted(p.count, "program") + ": " + spanText(p.ranges || [], p.runs, (q) => pidShort(q, grid)));
  }
  if (el && el.count) {
    add("elements", counted(el.count, "element") + (el.count === 1 ? " at offset " : " at offsets ") + spanText(el.ranges || [], el.runs, String, "..")
      + (el.lanes && el.lanes !== el.count ? ` (${counted(el.lanes, "access", "accesses")})` : ""));
  }
  const pe = x.past_end;
  if (pe && pe.past_end) add("past_end", `past the end by up to ${counted(pe.past_end, "element")}`);
  if (pe && pe.before_start) add("before_start", `before the start by up to ${counted(pe.before_start, "element")}`);
  const ml = x.mask_lanes;
  if (ml && ml.count) add("mask", `a mask must turn off block ${ml.count === 1 ? "lane" : "lanes"} ${spanText(ml.ranges || [], ml.runs, String, "..")} (${fmtNum(ml.count)} of ${fmtNum(ml.of)})`);
  const po = x.poisoned;
  if (po && po.values) add("poisoned", `${counted(po.values, "non-finite value")} stored (${fmtNum(po.nan)} NaN, ${fmtNum(po.inf)} Inf)`);
  if (x.exact === false) add("inexact", `at least: ${x.note || "not every program was seen"}`);
  return out;
}

export class FindingCard {
  // host: {select(k), line(k), program(k, j), element(k, j), store(k, j): the j-th store a release follows}
  constructor($, host) {
    this.$ = $;
    this.host = host;
    this.f = null;
    this.k = null;
    $("fc-prev").addEventListener("click", () => this.step(-1));
    $("fc-next").addEventListener("click", () => this.step(1));
    $("fc-body").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-step]");
      if (!b || this.k === null) return;
      const j = Number(b.dataset.j || 0);
      if (b.dataset.step === "finding") host.select(this.k);
      else if (b.dataset.step === "line") host.line(this.k);
      else if (b.dataset.step === "program") host.program(this.k, j);
      else if (b.dataset.step === "store") host.store(this.k, j);
      else host.element(this.k, j);
    });
  }

  set(f, launch) {
    this.f = f;
    this.launch = launch;
    this.k = null;
    const card = this.$("finding-card");
    card.hidden = !f || !f.kind.length;
    if (!card.hidden) this.show(0);
  }

  focus(k) {
    const ev = this.f.evidence[k], kind = this.f.kind[k], how = FOCUS[kind] || { mode: null, colour: null };
    if (ev.stores && ev.stores.length) return this.storeFocus(k, 0);
    return { kind, t: ev.tensor_index, indices: ev.indices.filter(Boolean), ...how };
  }

  // The j-th store a lock's release follows, drawn as the finding's evidence.
  storeFocus(k, j) {
    const s = this.f.evidence[k].stores[j];
    return { kind: this.f.kind[k], t: s.tensor_index, indices: s.indices, ...FOCUS.release_without_barrier };
  }

  // The op a finding selects in its program: its own, or for a release, the first store it follows (so the
  // tensor view opens on what was stored, and the atomic is one step away on the card).
  op(k) {
    const st = this.f.evidence[k].stores;
    return st && st.length && st[0].seq !== null ? st[0].seq : this.f.op[k];
  }

  step(d) {
    if (this.k === null) return;
    const k = Math.max(0, Math.min(this.f.kind.length - 1, this.k + d));
    if (k !== this.k) this.host.select(k);
  }

  show(k) {
    const f = this.f, ev = f.evidence[k];
    this.k = k;
    this.$("finding-card").dataset.k = String(k);
    this.$("fc-count").textContent = `${k + 1} of ${f.kind.length}${f.total > f.kind.length ? ` (${f.total} in all)` : ""}`;
    this.$("fc-prev").disabled = k === 0;
    this.$("fc-next").disabled = k === f.kind.length - 1;
    const step = (what, j, text, title) => h("button", { type: "button", class: "fc-step", "data-step": what, "data-j": j, title }, text);
    const path = h("ol", { class: "fc-path" });
    const src = this.launch.source, text = (ln) => ln ? (src.lines[ln - src.first_line] || "").trim() : "";
    if (f.line[k]) {
      const what = f.kind[k].startsWith("nonfinite") || f.kind[k] === "overflow" || f.kind[k] === "int_division" ? "born at line" : "line";
      path.append(h("li", {}, step("line", 0, `${what} ${f.line[k]}`, "show the line in the source"), h("code", {}, text(f.line[k]))));
    }
    if (ev.programs.length) {
      const li = h("li", {});
      ev.programs.forEach((p, j) => li.append(...[step("program", j, `program ${pidText(p)}`, "select the program on the grid"),
        j === 0 && f.op[k] !== null ? h("span", { class: "muted" }, `op ${f.op[k]}`) : null,
        j === 1 && ev.other_line ? h("span", { class: "muted" }, `line ${ev.other_line}`) : null].filter(Boolean)));
      path.append(li);
    }
    if (ev.stores && ev.stores.length) {
      const li = h("li", { class: "fc-stores" }, h("span", { class: "muted" }, "stored"));
      ev.stores.forEach((s, j) => li.append(step("store", j, `${s.name} at line ${s.line}`, "the elements this store wrote that other programs reach, outlined on the tensor"),
        h("span", { class: "muted" }, `${fmtNum(s.elements)} element(s) other programs reach${s.partial ? " (the first outlined)" : ""}`)));
      li.append(h("span", { class: "muted" }, "then released with no barrier between"));
      path.append(li);
    }
    if (ev.offsets.length) {
      const li = h("li", {}), name = f.tensor[k] || "?", lock = Boolean(ev.stores);
      if (lock) li.append(h("span", { class: "muted" }, "the atomic on"));
      ev.offsets.forEach((off, j) => {
        const label = ev.indices[j] ? `${name}[${ev.indices[j].join(", ")}]` : `${name} offset ${off}${ev.outside[j] ? " (outside)" : ""}`;
        li.append(step("element", j, label, ev.outside[j] ? "outside the tensor: drawn in the halo" : "every access to this element"));
      });
      // (a release's count is its stores' lanes, not more atomics)
      if (f.count[k] > ev.offsets.length && !lock) li.append(h("span", { class: "muted" }, `… ${f.count[k]} in all`));
      if (ev.valid_range) li.append(h("span", { class: "muted" }, `valid offsets ${ev.valid_range[0]}..${ev.valid_range[1]}`));
      path.append(li);
    }
    clear(this.$("fc-body")).append(
      h("div", { class: "fc-title" }, h("button", { type: "button", class: "fc-step fk", "data-step": "finding", title: "line, programs and elements at once" }, f.kind[k]),
        f.severity[k] ? h("span", { class: "sev" }, f.severity[k]) : null, h("span", { class: "fm" }, f.message[k])),
      this.extent(k), path);
  }

  // The finding's whole extent on one line; a note when the grid could not ring every program.
  extent(k) {
    const parts = extentParts(this.f.extent ? this.f.extent[k] : null, this.launch.grid), g = this.f.evidence[k].grid;
    const line = h("div", { class: "fc-extent" }, h("span", { class: "fc-label" }, "extent"));
    parts.forEach(({ part, text }) => line.append(h("span", { "data-part": part }, text)));
    if (g && g.runs > g.ranges.length) {
      line.append(h("span", { class: "muted", "data-part": "grid" }, `the grid rings the first ${counted(g.ranges.length, "run")} of programs`));
    }
    return parts.length ? line : null;
  }
}
