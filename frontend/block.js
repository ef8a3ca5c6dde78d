// The op's block in its own shape (a 32x64 load as 32x64 cells): what each lane did. Masked lanes are
// grey, lanes outside the tensor are red, active lanes are coloured by value (or by the op's kind when no
// value was recorded); hovering a lane shows its position, the offset it addressed, the element and value.
import { clear, fmtNum, gradientCss, h, pidText, rampColor, rgb, sizeCanvas } from "./dom.js";
import { blockLayout, finiteRange, unravel } from "./layout.js";

const MIN_PX = 8;     // the smallest lane cell of a 1-D block, in CSS pixels
const MASKED = [229, 231, 235], OOB = [220, 38, 38], KIND = { load: [37, 99, 235], store: [234, 88, 12] };
const SPECIAL = { nan: [236, 72, 153], inf: [220, 38, 38], "-inf": [30, 27, 75] };

export class BlockView {
  constructor($, api) {
    this.$ = $;
    this.api = api;
    this.canvas = $("block-canvas");
    this.data = null;
    this.req = 0;
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => { this.$("block-hover").textContent = ""; });
  }

  // Show op ``seq`` of program ``pid`` of launch ``li`` (null: nothing selected).
  async select(li, pid, seq) {
    const mine = ++this.req;
    if (pid === null || seq === null) { this.clear("Select an op (a load, store or atomic) to see its block."); return; }
    const data = await this.api("block", { i: li, pid, seq });
    if (mine !== this.req || !data) return;
    this.data = data;
    if (!data.lanes) { this.clear(`Op ${seq} (${data.kind}) has no lanes to draw: only loads, stores and atomics do.`); return; }
    this.draw();
  }

  clear(note) {
    this.data = null;
    sizeCanvas(this.canvas, 1, 1);
    this.canvas.dataset.key = "";
    clear(this.$("block-legend"));
    this.$("block-title").textContent = "";
    this.$("block-note").textContent = note;
  }

  draw() {
    const d = this.data, { R, C, px, wrapped } = blockLayout(d.grid, this.$("block-wrap").clientWidth - 4, MIN_PX);
    this.px = px;
    this.cols = C;
    const ctx = sizeCanvas(this.canvas, C * px, R * px);
    const img = new ImageData(C, R), buf = img.data, range = this.range();
    for (let k = 0; k < R * C; k++) {
      const col = this.color(k, range);
      buf[k * 4] = col[0]; buf[k * 4 + 1] = col[1]; buf[k * 4 + 2] = col[2]; buf[k * 4 + 3] = 255;
    }
    const off = document.createElement("canvas");
    off.width = C; off.height = R;
    off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, 0, 0, C * px, R * px);
    Object.assign(this.canvas.dataset, { key: `${d.program.join(",")}|${d.seq}`, px: String(px), rows: String(R), cols: String(C) });
    if (px >= 8) {        // white gaps between lanes, as one path
      ctx.strokeStyle = "#fff";
      ctx.beginPath();
      for (let x = px; x < C * px; x += px) { ctx.moveTo(x - 0.5, 0); ctx.lineTo(x - 0.5, R * px); }
      for (let y = px; y < R * px; y += px) { ctx.moveTo(0, y - 0.5); ctx.lineTo(C * px, y - 0.5); }
      ctx.stroke();
    }
    this.$("block-title").textContent = `op ${d.seq} of program ${pidText(d.program)}: ${d.kind} of ${d.tensor ?? "?"}, block ${d.shape.join("×") || "scalar"}`;
    const sw = (c, text) => { const s = h("span", { class: "swatch" }); s.style.background = rgb(c); return h("span", {}, s, text); };
    const box = clear(this.$("block-legend"));
    if (range) {
      const bar = h("span", { class: "bar" });
      bar.style.background = gradientCss("value");
      box.append(h("span", {}, fmtNum(range[0])), bar, h("span", {}, fmtNum(range[1])), sw(SPECIAL.nan, "NaN"), sw(SPECIAL.inf, "Inf"));
    } else box.append(sw(KIND[d.kind] || KIND.load, "active"));
    box.append(sw(MASKED, "masked off"), sw(OOB, "outside the tensor"));
    const notes = [`${d.active} of ${d.lanes} lanes active`];
    if (d.oob) notes.push(`${d.oob} active lane(s) outside '${d.tensor}'`);
    if (d.shape.length > 2) notes.push(`dims ${d.shape.slice(0, -1).join("×")} are drawn as ${R} rows`);
    if (wrapped) notes.push(`${d.grid[1]} lanes wrapped into rows of ${C}`);
    if (d.truncated) notes.push(`only the first ${d.mask.length} of ${d.lanes} lanes are drawn`);
    this.$("block-note").textContent = notes.join(" · ");
  }

  // the values of active lanes inside the tensor span the colour scale
  range() {
    const d = this.data;
    return d.value ? finiteRange(d.value, (k) => d.mask[k] && !d.out[k]) : null;
  }

  color(k, range) {
    const d = this.data;
    if (k >= d.mask.length) return [255, 255, 255];
    if (!d.mask[k]) return MASKED;
    if (d.out[k]) return OOB;
    const v = d.value ? d.value[k] : null;
    if (typeof v === "string") return SPECIAL[v] || SPECIAL.nan;
    if (range && typeof v === "number") return rampColor("value", range[1] > range[0] ? (v - range[0]) / (range[1] - range[0]) : 0.5);
    return KIND[d.kind] || KIND.load;
  }

  hover(e) {
    const d = this.data;
    if (!d || !d.lanes) return;
    const r = this.canvas.getBoundingClientRect(), C = this.cols, R = Math.ceil(d.grid[0] * d.grid[1] / C);
    const x = Math.floor((e.clientX - r.left) / this.px), y = Math.floor((e.clientY - r.top) / this.px), k = y * C + x;
    if (x < 0 || y < 0 || x >= C || y >= R || k >= d.mask.length) { this.$("block-hover").textContent = ""; return; }
    const lane = unravel(k, d.shape), parts = [`lane (${lane.join(", ")})`, `offset ${d.offset[k]}`];
    if (d.index && d.index[k]) parts.push(`${d.tensor}[${d.index[k].join(", ")}]`);
    parts.push(!d.mask[k] ? "masked off" : d.out[k] ? "outside the tensor" : "active");
    if (d.value && d.value[k] !== null) parts.push(`value ${fmtNum(d.value[k])}`);
    this.$("block-hover").textContent = parts.join(" · ");
  }
}
