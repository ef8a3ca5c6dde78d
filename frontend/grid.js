// The program grid: one canvas cell per program (or block of programs), coloured by a metric.
import { clear, gradientCss, h, pidText, rampColor, sizeCanvas } from "./dom.js";
import { cellOfProgram, gridLayout, linearOf, programOfCell } from "./layout.js";
import { fmtMetric } from "./units.js";

const NONE = [229, 231, 235];      // programs that recorded nothing
// The rings of a finding's programs, by role: a race's writers and readers apart, in the tensor view's colours
// for stored and loaded; "program" for every other finding (and a race's programs past the writers and
// readers its extent lists by id). A white line inside each ring keeps it apart from the cell's colour.
export const RINGS = { writer: "#ea580c", reader: "#2563eb", program: "#dc2626", unlisted: "#6b7280" };
const RING_LABEL = { writer: "writers", reader: "readers", program: "the finding's programs", unlisted: "also involved" };

// The metric the grid opens on: findings when the launch has some, else the first metric that varies
// across the grid (a uniform colour says nothing), in the order a newcomer reads them.
const TELLING = ["sector_efficiency", "masked_share", "load_bytes", "store_bytes", "dram_bytes", "flops"];
export function telling(data, labels, hasFindings) {
  if (hasFindings && data.ranges.findings && data.ranges.findings[1] > 0) return "findings";
  const varies = (k) => labels.has(k) && data.ranges[k] && data.ranges[k][1] > data.ranges[k][0];
  return TELLING.find(varies) || [...labels.keys()].find(varies) || "load_bytes";
}

// The cells of a grid slice that hold a program of ``runs`` ([[first, last]] linear ids, inclusive), as a
// Set. Work and memory are bounded by the slice's cells, not by the programs: a run of a million programs is
// a few rows of cells.
function cellsOfRuns(runs, slice) {
  const [gx, gy] = slice.grid, [bx, by] = slice.block, n = gx * gy, base = slice.z * n, out = new Set();
  const row = (y, xa, xb) => {
    const cy = Math.floor(y / by) * slice.cols;
    for (let cx = Math.floor(xa / bx); cx <= Math.floor(xb / bx); cx++) out.add(cy + cx);
  };
  for (const [first, last] of runs) {
    const lo = Math.max(first, base) - base, hi = Math.min(last, base + n - 1) - base;
    if (lo > hi) continue;
    const y0 = Math.floor(lo / gx), y1 = Math.floor(hi / gx);
    if (y0 === y1) { row(y0, lo % gx, hi % gx); continue; }
    row(y0, lo % gx, gx - 1);
    row(y1, 0, hi % gx);
    // the full rows between: whole rows of cells (a block row partly full counts, as a cell holds any)
    for (let cy = Math.floor((y0 + 1) / by); y1 - 1 >= y0 + 1 && cy <= Math.floor((y1 - 1) / by); cy++) row(cy * by, 0, gx - 1);
  }
  return out;
}

// Sorted distinct integers as text: runs of consecutive ones as "a-b", at most ``max`` runs, then "…".
function runsText(values, max = 32) {
  const parts = [];
  for (let i = 0; i < values.length; i++) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j] + 1) j++;
    if (parts.length === max) { parts.push("…"); break; }
    parts.push(i === j ? String(values[i]) : `${values[i]}-${values[j]}`);
    i = j;
  }
  return parts.join(",");
}

export class ProgramGrid {
  constructor($, onSelect, onHover) {
    this.$ = $;
    this.canvas = this.$("grid-canvas");
    this.onSelect = onSelect;
    this.onHover = onHover;
    this.data = null;
    this.metric = "load_bytes";
    this.labels = new Map();
    this.selected = null;   // linear id of the selected program
    this.marks = null;      // the selected finding's programs (evidence.grid: runs of linear ids), ringed
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => this.showHover(null));
    this.canvas.addEventListener("click", (e) => {
      const c = this.cellAt(e);
      if (c !== null && this.data.recorded[c]) this.onSelect(this.pidOfCell(c), e.timeStamp);
    });
    // the panel's width changes with the window (and a notebook output's when it is attached): redraw only
    // when the cell size changes, so a scrollbar that comes and goes cannot loop
    if (typeof ResizeObserver !== "undefined") {
      new ResizeObserver(() => {
        if (!this.data) return;
        const px = this.lay.px;
        this.layOut();
        if (this.lay.px !== px) this.draw();
      }).observe(this.$("grid-wrap"));
    }
  }

  set(data, labels) {
    this.data = data;
    this.labels = labels;
    this.layOut();
    this.draw();
  }

  // Cells as large as the Programs panel's width allows (every column in view, no sideways scrolling);
  // the default width while the panel is not laid out (hidden, or a notebook output not yet attached).
  layOut() {
    const w = this.$("grid-wrap").clientWidth;
    this.lay = w > 0 ? gridLayout(this.data.cols, this.data.rows, w) : gridLayout(this.data.cols, this.data.rows);
  }

  cellXY(c) {
    const L = this.lay;
    if (L.wrap) return [c % L.wrap, Math.floor(c / L.wrap)];
    return [c % this.data.cols, Math.floor(c / this.data.cols)];
  }

  cellAt(e) {
    if (!this.data) return null;
    const r = this.canvas.getBoundingClientRect(), L = this.lay;
    const x = Math.floor((e.clientX - r.left) / L.px), y = Math.floor((e.clientY - r.top) / L.px);
    if (x < 0 || y < 0 || x >= L.cols || y >= L.rows) return null;
    const c = L.wrap ? y * L.wrap + x : y * this.data.cols + x;
    return c < this.data.recorded.length ? c : null;
  }

  // The first program of a cell (cells are single programs unless the slice was reduced to blocks).
  pidOfCell(c) { return programOfCell(c, this.data); }

  linear(p) { return linearOf(p, this.data.grid); }

  cellOfLinear(lin) { return cellOfProgram(lin, this.data); }

  // cell -> role of the selected finding's programs on this slice, rebuilt when the finding or slice changes.
  // A cell of several programs takes the first role it holds of writer, reader, program.
  markRoles() {
    const m = this.marks, d = this.data;
    if (this.rolesOf === m && this.rolesData === d) return this.roles;
    const roles = new Map();
    if (m) {
      const race = Boolean(m.writers || m.readers);
      const add = (runs, role) => { for (const c of cellsOfRuns(runs || [], d)) if (!roles.has(c)) roles.set(c, role); };
      if (race) { add(m.writers && m.writers.ranges, "writer"); add(m.readers && m.readers.ranges, "reader"); }
      add(m.ranges, race ? "unlisted" : "program");
    }
    Object.assign(this, { roles, rolesOf: m, rolesData: d });
    return roles;
  }

  // The cells as an image of one pixel per cell, rebuilt only when the data or the metric change;
  // every draw scales it up without smoothing, so a click that only moves the outline is cheap.
  cellImage() {
    const key = this.metric;
    if (this.img && this.imgData === this.data && this.imgKey === key) return this.img;
    const d = this.data, L = this.lay, vals = d.metrics[this.metric], [lo, hi] = d.ranges[this.metric];
    const span = hi > lo ? hi - lo : 1;
    const lut = [];
    for (let k = 0; k < 256; k++) lut.push(rampColor(this.metric, k / 255));
    const canvas = document.createElement("canvas");
    canvas.width = L.cols; canvas.height = L.rows;
    const c2 = canvas.getContext("2d"), img = c2.createImageData(L.cols, L.rows), px = img.data;
    for (let i = 0; i < px.length; i += 4) { px[i] = 243; px[i + 1] = 244; px[i + 2] = 246; px[i + 3] = 255; }
    for (let c = 0; c < vals.length; c++) {
      const [x, y] = this.cellXY(c), v = vals[c], i = (y * L.cols + x) * 4;
      let col = NONE;
      // clamped: values arrive rounded (payload._num), so one may sit a hair past the unrounded range
      if (d.recorded[c] && v !== null) col = lut[Math.min(255, Math.max(0, Math.round(255 * (hi > lo ? (v - lo) / span : (v > 0 ? 1 : 0)))))];
      px[i] = col[0]; px[i + 1] = col[1]; px[i + 2] = col[2];
    }
    c2.putImageData(img, 0, 0);
    Object.assign(this, { img: canvas, imgData: d, imgKey: key });
    return canvas;
  }

  draw() {
    const d = this.data, L = this.lay, px = L.px, W = L.cols * px, H = L.rows * px;
    const ds = this.canvas.dataset;
    if (ds.px !== String(px) || ds.cols !== String(L.cols) || ds.rows !== String(L.rows)) {
      this.ctx = sizeCanvas(this.canvas, W, H);
    }
    ds.z = String(d.z ?? 0);        // which z slice is drawn (tests wait for it after a slice change)
    const ctx = this.ctx;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.cellImage(), 0, 0, W, H);
    if (px >= 8) {       // white gaps between cells, as one path
      ctx.strokeStyle = "#fff";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let x = px; x < W; x += px) { ctx.moveTo(x - 0.5, 0); ctx.lineTo(x - 0.5, H); }
      for (let y = px; y < H; y += px) { ctx.moveTo(0, y - 0.5); ctx.lineTo(W, y - 0.5); }
      ctx.stroke();
    }
    // the finding's programs: a ring per cell, coloured by role (the first program of each cell is listed
    // in data-marks, data-writers, data-readers as runs: the attributes stay short whatever the finding)
    const roles = this.markRoles(), byRole = { writer: [], reader: [], program: [], unlisted: [] };
    for (const [c, role] of roles) {
      const [x, y] = this.cellXY(c);
      ctx.lineWidth = 2;
      ctx.strokeStyle = RINGS[role];
      ctx.strokeRect(x * px + 1, y * px + 1, Math.max(px - 2, 2), Math.max(px - 2, 2));
      if (px >= 10) { ctx.lineWidth = 1; ctx.strokeStyle = "#fff"; ctx.strokeRect(x * px + 2.5, y * px + 2.5, px - 5, px - 5); }
      byRole[role].push(linearOf(this.pidOfCell(c), d.grid));
    }
    const sorted = (a) => a.sort((p, q) => p - q);
    ds.marks = runsText(sorted([...byRole.writer, ...byRole.reader, ...byRole.program, ...byRole.unlisted]));
    ds.markCells = String(roles.size);
    ds.writers = runsText(sorted(byRole.writer));
    ds.readers = runsText(sorted(byRole.reader));
    const sel = this.selected === null ? null : this.cellOfLinear(this.selected);
    if (sel !== null) {      // a dark ring with a white core, visible on every colour of the ramp
      // inside a finding's ring, where the cell has room, so the ring's colour still shows
      const inset = roles.has(sel) && px >= 14 ? 4 : 0;
      const [x, y] = this.cellXY(sel), o = Math.max(px - (px >= 8 ? 1 : 0) - inset, 5);
      const cx = Math.min(W - o, Math.max(0, x * px + px / 2 - o / 2)), cy = Math.min(H - o, Math.max(0, y * px + px / 2 - o / 2));
      ctx.lineWidth = 2; ctx.strokeStyle = "#111827"; ctx.strokeRect(cx + 1, cy + 1, o - 2, o - 2);
      if (o >= 8) { ctx.strokeStyle = "#fff"; ctx.strokeRect(cx + 3, cy + 3, o - 6, o - 6); }
    }
    Object.assign(ds, { selected: this.selected === null ? "" : String(this.selected), metric: this.metric, px: String(px), cols: String(L.cols), rows: String(L.rows), wrap: String(L.wrap) });
    const legendKey = this.metric + "|" + this.imgKey + "|" + Object.keys(byRole).filter((r) => byRole[r].length).join();
    if (this.legendKey !== legendKey || this.legendData !== d) {
      const [lo, hi] = d.ranges[this.metric];
      this.legend(lo, hi, Object.keys(byRole).filter((r) => byRole[r].length));
      this.legendKey = legendKey;
      this.legendData = d;
    }
    performance.mark("tt-grid-painted");
  }

  legend(lo, hi, rings = []) {
    const bar = h("span", { class: "bar" });
    bar.style.background = gradientCss(this.metric);
    const d = this.data;
    const note = d.block[0] * d.block[1] > 1 ? ` · each cell is ${d.block[0]}×${d.block[1]} programs` : "";
    const wrapNote = this.lay.wrap ? ` · x wraps every ${this.lay.wrap}` : "";
    clear(this.$("grid-legend")).append(h("span", {}, fmtMetric(this.metric, lo)), bar, h("span", {}, fmtMetric(this.metric, hi)),
      this.noneSwatch(), ...rings.map((r) => this.ringSwatch(r)), h("span", {}, `grid ${d.grid.join("×")}${note}${wrapNote}`));
  }

  ringSwatch(role) {
    const s = h("span", { class: "swatch ring" });
    s.style.borderColor = RINGS[role];
    return h("span", { "data-ring": role }, s, RING_LABEL[role]);
  }

  noneSwatch() {
    const s = h("span", { class: "swatch" });
    s.style.background = `rgb(${NONE.join(",")})`;
    return h("span", {}, s, "not recorded");
  }

  hover(e) {
    const c = this.cellAt(e);
    this.showHover(c);
    if (c !== null && c !== this.hovered && this.data.recorded[c]) this.onHover(this.pidOfCell(c));
    this.hovered = c;
  }

  showHover(c) {
    const el = this.$("grid-hover");
    if (c === null) { el.textContent = "Hover a program to see its numbers; click to select it."; return; }
    const d = this.data, pid = this.pidOfCell(c);
    if (!d.recorded[c]) { el.textContent = `program ${pidText(pid)} · not recorded`; return; }
    const parts = [...this.labels.keys()].filter((k) => k in d.metrics).map((k) => `${this.labels.get(k)}: ${fmtMetric(k, d.metrics[k][c])}`);
    const head = d.block[0] * d.block[1] > 1 ? `programs from ${pidText(pid)} (${d.block[0]}×${d.block[1]})` : `program ${pidText(pid)}`;
    el.textContent = head + " · " + parts.join(" · ");
  }
}
