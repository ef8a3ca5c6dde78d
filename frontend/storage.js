// A tensor's storage in storage order (StoragePayload, storageview.py): its shape, strides, storage offset and
// element size; which storage elements the view's logical elements cover and which are padding (a padded row
// stride's tails, what a slice leaves out, nothing at all for a transposed view); and what the tensor view's
// selection read and wrote there, out-of-bounds lanes in red past the storage's ends. It follows the tensor
// view: the same tensor, the same op, program or all programs.
import { cellValues, valueColour, valueKey, valueNote, valueText } from "./cellvalues.js";
import { clear, fmtNum, h, pidText, rgb, setPanelOpen, sizeCanvas } from "./dom.js";
import { OOB_RED, drawEvidence, haloMargin } from "./evidence.js";
import { planePx } from "./layout.js";
import { KIND_COLOR, UNTOUCHED } from "./tensorlegend.js";
import { fmtBytes, fmtPct } from "./units.js";

export const PADDING = [254, 243, 199];     // storage that no logical element of the view covers
export const NO_STORAGE = [255, 255, 255];  // past the storage's end (the short last row)
const KIND_TEXT = { 1: "loaded", 2: "stored", 3: "loaded and stored" };

// The logical index of storage offset ``off`` in a non-overlapping view (shape, strides, storage offset), with
// "*" for a dim of stride 0 (every index of it sits there), or null when no logical element sits there.
export function storageIndex(off, shape, strides, base) {
  const dims = shape.map((_, d) => d).filter((d) => shape[d] > 1 && strides[d] > 0).sort((a, b) => strides[b] - strides[a]);
  const idx = shape.map((s, d) => (s > 1 && strides[d] === 0 ? "*" : 0));
  let rem = off - base;
  if (rem < 0) return null;
  for (const d of dims) {
    const q = Math.floor(rem / strides[d]);
    if (q >= shape[d]) return null;
    idx[d] = q;
    rem -= q * strides[d];
  }
  return rem === 0 ? idx : null;
}

export class StoragePanel {
  // api(route, values) -> payload | null (view.js)
  constructor($, api) {
    this.$ = $;
    this.api = api;
    this.open = false;
    this.sel = null;        // the tensor view's selection: {t, mode, program, op}
    this.wraps = {};        // tensor -> row length the user chose
    this.zoom = true;
    this.colour = "access";     // or "value": the recorded values as a heat map
    this.data = null;
    this.req = 0;
    this.canvas = $("storage-canvas");
    this.onMoved = () => {};  // the panel opened, closed or followed the view: the host's place follows it
    $("storage-open").addEventListener("click", () => { if (this.open) this.close(); else this.show(); this.onMoved(); });
    $("tensor-storage").addEventListener("click", () => { this.show(true); this.onMoved(); });
    $("storage-wrap").addEventListener("change", (e) => {
      if (!this.sel) return;
      this.wraps[this.sel.t] = Math.max(1, Number(e.target.value) || 1);
      this.load();
    });
    $("storage-zoom").addEventListener("click", () => { this.zoom = !this.zoom; this.load(); });
    $("storage-colour").addEventListener("change", (e) => { this.colour = e.target.value; if (this.data) this.draw(); });
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => { this.$("storage-hover").textContent = ""; });
  }

  setLaunch(li) {
    this.li = li;
    this.wraps = {};
    this.sel = null;
    this.data = null;
  }

  // The tensor view drew a selection; the storage follows it while the panel is open.
  follow(sel) {
    this.sel = sel;
    if (!this.open) return null;
    this.onMoved();
    return this.load();
  }

  async show(reveal) {
    this.open = true;
    setPanelOpen(this.$, "storage", true, reveal);
    await this.load();
  }

  close() {
    this.open = false;
    setPanelOpen(this.$, "storage", false);
    this.$("storage-body").hidden = true;
    this.$("storage-controls").hidden = true;
    this.$("storage-title").textContent = "";
  }

  request() {
    const s = this.sel;
    return { i: this.li, t: s.t, mode: s.mode, program: s.mode !== "all" ? s.program : null, op: s.mode === "op" ? s.op : null,
             wrap: this.wraps[s.t] ?? null, window: this.zoom && s.mode !== "all" ? "auto" : null };
  }

  async load() {
    const mine = ++this.req;
    if (!this.sel) { this.$("storage-title").textContent = "Pick a tensor in the Tensor panel."; return; }
    const data = await this.api("storage", this.request());
    if (mine !== this.req || !data) return;
    this.data = data;
    this.draw();
  }

  draw() {
    const d = this.data, pl = d.plane, sel = d.selection;
    this.$("storage-body").hidden = false;
    this.$("storage-controls").hidden = false;
    this.$("storage-wrap").value = String(pl.wrap);
    this.$("storage-colour").value = this.colour;
    this.vals = cellValues(d.values, pl.cell_cols);
    const zoom = this.$("storage-zoom");
    zoom.hidden = sel.mode === "all" || !(pl.windowed || pl.cell[0] * pl.cell[1] > 1);
    zoom.setAttribute("aria-pressed", String(this.zoom));
    const what = sel.mode === "all" ? "all programs" : sel.mode === "program" ? `program ${pidText(sel.program)}`
      : `op ${sel.op} of program ${pidText(sel.program)}`;
    this.$("storage-title").textContent = `${d.name} · ${what}`;
    this.facts();
    this.paint();
    this.legend();
  }

  facts() {
    const d = this.data, L = d.layout, B = d.elem_bytes, box = clear(this.$("storage-facts"));
    const stat = (label, value, key) => h("span", { class: "stat", "data-fact": key }, h("b", {}, value), h("span", {}, label));
    const els = (n) => (n === null ? "?" : `${fmtNum(n)} (${fmtBytes(n * B)})`);
    box.append(stat("shape", d.shape.join("×") || "scalar", "shape"), stat("strides", `(${d.strides.join(", ")})`, "strides"),
      stat("storage offset", fmtNum(d.storage_offset), "offset"), stat("element", `${d.dtype}, ${fmtBytes(B)}`, "element"),
      stat("storage elements", els(d.storage_size), "storage"),
      stat("view spans offsets", L.span ? `${fmtNum(L.span[0])}–${fmtNum(L.span[1])}` : "none", "span"),
      stat("logical → storage elements", `${fmtNum(L.elements)} → ${L.covered === null ? "?" : fmtNum(L.covered)}`, "covered"),
      stat("padding", els(L.padding), "padding"),
      stat("padding: before · between · after", L.gaps === null ? "?" : `${fmtNum(L.before)} · ${fmtNum(L.gaps)} · ${fmtNum(L.after)}`, "where"));
  }

  paint() {
    const d = this.data, pl = d.plane, c = d.cells, m = haloMargin(pl, d.halo);
    const px = planePx(pl.cell_cols, pl.cell_rows, this.$("storage-box").clientWidth - 4);
    this.px = px; this.m = m;
    const W = pl.cell_cols * px, H = pl.cell_rows * px;
    const ctx = sizeCanvas(this.canvas, Math.max(1, W + (m.left + m.right) * px), Math.max(1, H + (m.top + m.bottom) * px));
    ctx.translate(m.left * px, m.top * px);
    const n = pl.cell_rows * pl.cell_cols, img = new ImageData(Math.max(1, pl.cell_cols), Math.max(1, pl.cell_rows)), buf = img.data;
    const put = (k, col) => { buf[k * 4] = col[0]; buf[k * 4 + 1] = col[1]; buf[k * 4 + 2] = col[2]; buf[k * 4 + 3] = 255; };
    const mix = (a, b, f) => a.map((v, j) => Math.round(v + (b[j] - v) * f));
    for (let k = 0; k < n; k++) put(k, this.firstOffset(k) < d.storage_size ? PADDING : NO_STORAGE);
    if (d.cover.known) for (const [start, count, fill] of d.cover.runs) for (let k = start; k < start + count; k++) put(k, mix(PADDING, UNTOUCHED, fill));
    this.kinds = new Uint8Array(n);       // per cell: 1 read, 2 written, 3 both (0: not touched)
    this.share = new Float32Array(n);     // per cell: the share of its elements touched
    const vals = this.colour === "value" ? this.vals : null;
    for (const [first, count, kind, fill] of c) {
      const col = mix(UNTOUCHED, KIND_COLOR[kind] || KIND_COLOR[3], 0.3 + 0.7 * fill);
      for (let k = first; k < first + count; k++) {
        this.kinds[k] = kind; this.share[k] = fill;
        put(k, this.colour === "value" ? valueColour(vals ? vals.at(k) : null, vals ? vals.range : [0, 0]) : col);
      }
    }
    const off = document.createElement("canvas");
    off.width = img.width; off.height = img.height;
    off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, 0, 0, W, H);
    if (px >= 6) {
      ctx.strokeStyle = "#fff";
      ctx.beginPath();
      for (let x = px; x < W; x += px) { ctx.moveTo(x - 0.5, 0); ctx.lineTo(x - 0.5, H); }
      for (let y = px; y < H; y += px) { ctx.moveTo(0, y - 0.5); ctx.lineTo(W, y - 0.5); }
      ctx.stroke();
    }
    const drawn = drawEvidence(ctx, px, d.halo, []);
    const sel = d.selection;
    Object.assign(this.canvas.dataset, { px: String(px), cellRows: String(pl.cell_rows), cellCols: String(pl.cell_cols),
      ox: String(m.left), oy: String(m.top), halo: String(drawn.halo), wrap: String(pl.wrap), colour: this.colour,
      key: [sel.mode, d.tensor, sel.program ? sel.program.join(",") : "", sel.op ?? ""].join("|") });
  }

  // The storage offset of the first element a cell covers.
  firstOffset(k) {
    const pl = this.data.plane, r = Math.floor(k / pl.cell_cols), c = k % pl.cell_cols;
    return (pl.origin[0] + r * pl.cell[0]) * pl.wrap + pl.origin[1] + c * pl.cell[1];
  }

  legend() {
    const d = this.data, L = d.layout, pl = d.plane, box = clear(this.$("storage-legend"));
    const sw = (col, text) => { const s = h("span", { class: "swatch edge" }); s.style.background = rgb(col); return h("span", {}, s, text); };
    if (this.colour === "value") box.append(...valueKey(this.vals && this.vals.range));
    else box.append(sw(KIND_COLOR[1], "loaded"), sw(KIND_COLOR[2], "stored"), sw(KIND_COLOR[3], "both"));
    box.append(sw(UNTOUCHED, `an element of ${d.name}, not touched`), sw(PADDING, "padding: no element of the view"),
      sw(NO_STORAGE, "past the storage's end"));
    if (d.oob_lanes) box.append(sw(OOB_RED, "outside the storage (would-be position)"));
    const notes = [`Storage order, ${fmtNum(pl.wrap)} elements (${fmtBytes(pl.wrap * d.elem_bytes)}) a row` +
      (d.strides.some((s, k) => s === pl.wrap && d.shape[k] > 1) ? `: the row stride, so a row of the drawing is a row of storage.` : ".")];
    if (L.expanded.length) notes.push(`Dim${L.expanded.length > 1 ? "s" : ""} ${L.expanded.join(", ")} ha${L.expanded.length > 1 ? "ve" : "s"} stride 0 (expanded): every index of it shares one storage element.`);
    const natural = L.order.every((dim, k) => k === 0 || dim > L.order[k - 1]);
    if (!natural) notes.push(`The dims lie in storage in the order ${L.order.join(", ")} (largest stride first): not the view's order, as in a transposed view.`);
    if (L.overlapping && !L.expanded.length) notes.push("Logical elements overlap in storage (an as_strided view).");
    if (!d.cover.known) notes.push("Which storage elements the view covers cannot be told for a layout this large and overlapping.");
    if (d.cover.sampled) notes.push("Coverage is sampled: one element per cell.");
    if (d.aliases.length) notes.push(`Accesses through ${d.aliases.join(", ")} (the same storage) are drawn too.`);
    if (pl.windowed) notes.push(`Zoomed: rows ${pl.origin[0]}–${pl.origin[0] + pl.rows - 1}, columns ${pl.origin[1]}–${pl.origin[1] + pl.cols - 1} of ${pl.full[0]}×${pl.full[1]} (storage offsets from ${fmtNum(pl.origin[0] * pl.wrap + pl.origin[1])}).`);
    if (pl.cell[0] * pl.cell[1] > 1) notes.push(`Downsampled: each cell is ${pl.cell[0]}×${pl.cell[1]} elements.`);
    if (d.oob_lanes) notes.push(`⚠ ${fmtNum(d.oob_lanes)} active lane(s) fall outside the storage (offsets ${d.oob_examples.join(", ")}…), drawn in red at their would-be offsets.`);
    const values = this.colour === "value" || (this.vals && !this.vals.exact) ? valueNote(this.vals, "these accesses") : "";
    if (values) notes.push(values);
    if (d.dropped.length) notes.push(`To stay small, this view left out: ${d.dropped.join(", ")}.`);
    this.$("storage-note").textContent = notes.join(" ");
  }

  hover(e) {
    const d = this.data;
    if (!d) return;
    const pl = d.plane, r = this.canvas.getBoundingClientRect(), out = this.$("storage-hover");
    const cx = Math.floor((e.clientX - r.left) / this.px) - this.m.left, cy = Math.floor((e.clientY - r.top) / this.px) - this.m.top;
    const hk = d.halo.row.findIndex((row, k) => row === cy && d.halo.col[k] === cx);
    if (hk >= 0) { out.textContent = `storage offset ${d.halo.offset[hk]}: outside the storage (0..${d.storage_size - 1}); an out-of-bounds lane`; return; }
    if (cx < 0 || cy < 0 || cx >= pl.cell_cols || cy >= pl.cell_rows) { out.textContent = ""; return; }
    const k = cy * pl.cell_cols + cx, first = this.firstOffset(k), B = d.elem_bytes;
    if (first >= d.storage_size) { out.textContent = `past the storage's end (${fmtNum(d.storage_size)} elements)`; return; }
    const parts = [pl.cell[0] * pl.cell[1] > 1 ? `storage offsets from ${fmtNum(first)}` : `storage offset ${fmtNum(first)} (bytes ${fmtNum(first * B)}–${fmtNum(first * B + B - 1)})`];
    if (pl.cell[0] * pl.cell[1] === 1 && !d.layout.overlapping) {
      const idx = storageIndex(first, d.shape, d.strides, d.storage_offset);
      parts.push(idx ? `${d.name}[${idx.join(", ")}]` : "padding: no element of the view");
    }
    if (this.kinds[k]) {
      parts.push(KIND_TEXT[this.kinds[k]]);
      if (pl.cell[0] * pl.cell[1] > 1) parts.push(`${fmtPct(this.share[k])} of the cell touched`);
      const value = valueText(this.vals, k);
      if (value) parts.push(value);
    } else parts.push("not touched");
    out.textContent = parts.join(" · ");
  }
}
