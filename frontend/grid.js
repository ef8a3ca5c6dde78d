// The program grid: one canvas cell per program (or block of programs), coloured by a metric.
import { $, clear, fmtMetric, gradientCss, h, pidText, rampColor, rgb, sizeCanvas } from "./dom.js";

const MAX_WIDTH = 356;

export class ProgramGrid {
  constructor(onSelect) {
    this.canvas = $("grid-canvas");
    this.onSelect = onSelect;
    this.data = null;
    this.metric = "load_bytes";
    this.labels = {};
    this.selected = null;   // linear id of the selected program
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => this.showHover(null));
    this.canvas.addEventListener("click", (e) => {
      const c = this.cellAt(e);
      if (c !== null && this.data.recorded[c]) this.onSelect(this.pidOfCell(c), e.timeStamp);
    });
  }

  // The display layout: a 1-D grid of many programs wraps into rows.
  layout() {
    const d = this.data;
    let cols = d.cols, rows = d.rows, wrap = 0;
    if (rows === 1 && cols > 64) {
      wrap = 2 ** Math.ceil(Math.log2(Math.sqrt(cols)));
      rows = Math.ceil(cols / wrap);
      cols = wrap;
    }
    const px = Math.max(3, Math.min(36, Math.floor(MAX_WIDTH / cols)));
    return { cols, rows, wrap, px };
  }

  set(data, labels) {
    this.data = data;
    this.labels = labels;
    this.lay = this.layout();
    this.draw();
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
  pidOfCell(c) {
    const d = this.data, [bx, by] = d.block;
    return [(c % d.cols) * bx, Math.floor(c / d.cols) * by, d.z];
  }

  cellOfLinear(lin) {
    const [gx, gy] = this.data.grid, [bx, by] = this.data.block;
    const x = lin % gx, y = Math.floor(lin / gx) % gy, z = Math.floor(lin / (gx * gy));
    if (z !== this.data.z) return null;
    return Math.floor(y / by) * this.data.cols + Math.floor(x / bx);
  }

  draw() {
    const d = this.data, L = this.lay, px = L.px;
    const ctx = sizeCanvas(this.canvas, L.cols * px, L.rows * px);
    const vals = d.metrics[this.metric], [lo, hi] = d.ranges[this.metric];
    const span = hi > lo ? hi - lo : 1;
    const gap = px >= 8 ? 1 : 0;
    ctx.fillStyle = "#f3f4f6";
    ctx.fillRect(0, 0, L.cols * px, L.rows * px);
    for (let c = 0; c < vals.length; c++) {
      const [x, y] = this.cellXY(c);
      const v = vals[c];
      if (!d.recorded[c] || v === null) {
        ctx.fillStyle = "#e5e7eb";
        ctx.fillRect(x * px, y * px, px - gap, px - gap);
        if (px >= 8) { ctx.strokeStyle = "#cbd5e1"; ctx.beginPath(); ctx.moveTo(x * px, y * px + px - gap); ctx.lineTo(x * px + px - gap, y * px); ctx.stroke(); }
        continue;
      }
      ctx.fillStyle = rgb(rampColor(this.metric, hi > lo ? (v - lo) / span : (v > 0 ? 1 : 0)));
      ctx.fillRect(x * px, y * px, px - gap, px - gap);
    }
    const sel = this.selected === null ? null : this.cellOfLinear(this.selected);
    if (sel !== null) {
      const [x, y] = this.cellXY(sel);
      ctx.lineWidth = 2; ctx.strokeStyle = "#fff"; ctx.strokeRect(x * px + 1, y * px + 1, px - 2 - gap, px - 2 - gap);
      ctx.lineWidth = 1; ctx.strokeStyle = "#111827"; ctx.strokeRect(x * px - 0.5, y * px - 0.5, px + 1 - gap, px + 1 - gap);
    }
    this.canvas.dataset.metric = this.metric;
    this.canvas.dataset.px = String(px);
    this.canvas.dataset.cols = String(L.cols);
    this.canvas.dataset.wrap = String(L.wrap);
    this.legend(lo, hi);
    performance.mark("tt-grid-painted");
  }

  legend(lo, hi) {
    const bar = h("span", { class: "bar" });
    bar.style.background = gradientCss(this.metric);
    const d = this.data;
    const note = d.block[0] * d.block[1] > 1 ? ` · each cell is ${d.block[0]}×${d.block[1]} programs` : "";
    const wrapNote = this.lay.wrap ? ` · x wraps every ${this.lay.wrap}` : "";
    clear($("grid-legend")).append(h("span", {}, fmtMetric(this.metric, lo)), bar, h("span", {}, fmtMetric(this.metric, hi)),
      this.noneSwatch(), h("span", {}, `grid ${d.grid.join("×")}${note}${wrapNote}`));
  }

  noneSwatch() {
    const s = h("span", { class: "swatch" });
    s.style.background = "#e5e7eb";
    return h("span", {}, s, "not recorded");
  }

  hover(e) { this.showHover(this.cellAt(e)); }

  showHover(c) {
    const el = $("grid-hover");
    if (c === null) { el.textContent = "Hover a program to see its numbers; click to select it."; return; }
    const d = this.data, pid = this.pidOfCell(c);
    if (!d.recorded[c]) { el.textContent = `program ${pidText(pid)} · not recorded`; return; }
    const parts = Object.keys(d.metrics).map((k) => `${this.labels[k] || k}: ${fmtMetric(k, d.metrics[k][c])}`);
    const head = d.block[0] * d.block[1] > 1 ? `programs from ${pidText(pid)} (${d.block[0]}×${d.block[1]})` : `program ${pidText(pid)}`;
    el.textContent = head + " · " + parts.join(" · ");
  }
}
