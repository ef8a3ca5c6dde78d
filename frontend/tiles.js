// One program's tiles side by side: every tensor the selected program touched (a matmul's A panel, B panel and
// C tile), each on its own plane, one step of the program's loop at a time (TilesPayload, tilesview.py). The
// trace records ops, not loop trips: the server reads the trips back from lines that repeat, and steps
// through the program's memory ops in op order when none does; the panel says which.
import { cellValues, valueColour, valueKey, valueNote, valueText } from "./cellvalues.js";
import { clear, fmtNum, h, pidText, rgb, setPanelOpen, sizeCanvas } from "./dom.js";
import { cellOf, drawEvidence, haloMargin } from "./evidence.js";
import { planePx } from "./layout.js";
import { KIND_COLOR, UNTOUCHED } from "./tensorlegend.js";
import { fmtPct } from "./units.js";

export const CONTEXT = [148, 163, 184];     // touched by the program in another step (or outside the loop)
const KIND_TEXT = { 1: "loaded", 2: "stored", 3: "loaded and stored" };

// What a tile's step covers, in the tensor's own terms: "rows 32–63 · cols 0–31", "elements 64–127" (the
// browser tests read it).
function boxText(tile) {
  const b = tile.box, pl = tile.plane;
  if (!b) return "not touched in this step";
  if (pl.wrap) return `elements ${tile.first}–${tile.last}`;
  if (pl.row_dim === null) return `elements ${b[2]}–${b[3]}`;
  const fixed = pl.index.map((v, d) => (d === pl.row_dim || d === pl.col_dim ? null : `dim ${d} = ${v}`)).filter(Boolean);
  return [`rows ${b[0]}–${b[1]}`, `cols ${b[2]}–${b[3]}`, ...fixed].join(" · ");
}

export class TilesPanel {
  // api(route, values) -> payload | null (view.js)
  constructor($, api) {
    this.$ = $;
    this.api = api;
    this.open = false;
    this.li = null;
    this.pid = null;
    this.step = null;       // null: every step at once
    this.fed = new Map();   // tensor -> view indices that fed the element picked in the tensor view (outlined)
    this.colour = "access";     // or "value": each tile's recorded values as a heat map (its own range)
    this.data = null;
    this.req = 0;
    this.onMoved = () => {};  // the panel opened, closed, stepped or followed the program: the host's place follows it
    $("tiles-open").addEventListener("click", () => { if (this.open) this.close(); else this.show(); this.onMoved(); });
    $("program-tiles").addEventListener("click", () => { this.show(true); this.onMoved(); });
    $("tiles-all").addEventListener("click", () => this.go(null));
    $("tiles-prev").addEventListener("click", () => this.stepBy(-1));
    $("tiles-next").addEventListener("click", () => this.stepBy(1));
    $("tiles-colour").addEventListener("change", (e) => { this.colour = e.target.value; if (this.open && this.data) this.draw(); });
    this.$("tiles-body").addEventListener("mousemove", (e) => this.hover(e));
    // with the panel focused, the arrows step through the trips (the page's ↑ / ↓ stay the op keys)
    $("tiles-panel").addEventListener("keydown", (e) => {
      if (e.target.closest("input, select, textarea") || !["ArrowLeft", "ArrowRight"].includes(e.key)) return;
      e.preventDefault();
      e.stopPropagation();
      this.stepBy(e.key === "ArrowRight" ? 1 : -1);
    });
  }

  setLaunch(launch, li) {
    this.launch = launch;
    this.li = li;
    this.select(null);
  }

  // The loads that fed the element picked in the tensor view (FeedsPayload, or null): their elements are
  // outlined on their tensors' tiles, every input at once.
  outline(feeds) {
    this.fed = new Map();
    for (const f of feeds ? feeds.feeds : []) {
      if (f.tensor !== null) this.fed.set(f.tensor, (this.fed.get(f.tensor) || []).concat(f.indices));
    }
    if (this.open && this.data) this.draw();
  }

  // The selected program changed (null: none); its tiles are fetched only while the panel is open.
  select(pid) {
    const same = pid && this.pid && pid.join() === this.pid.join();
    this.pid = pid;
    if (!same) this.step = null;
    this.$("program-tiles").disabled = !pid;
    if (!this.open) return null;
    this.onMoved();
    return this.load();
  }

  async show(reveal) {
    this.open = true;
    setPanelOpen(this.$, "tiles", true, reveal);
    await this.load();
  }

  close() {
    this.open = false;
    setPanelOpen(this.$, "tiles", false);
    for (const id of ["tiles-body", "tiles-legend", "tiles-hover", "tiles-note", "tiles-controls"]) this.$(id).hidden = true;
    this.$("tiles-title").textContent = "";
  }

  go(step) {
    if (!this.data) return null;
    if (step !== null && (step < 0 || step >= this.data.steps)) return null;
    this.step = step;
    this.onMoved();
    return this.load();
  }

  // The next (d = 1) or previous (-1) trip, as the ‹ › buttons and the [ ] keys step: from "all" to the first
  // or the last one.
  stepBy(d) {
    if (!this.open || !this.data || !this.data.steps) return null;
    if (this.step === null) return this.go(d > 0 ? 0 : this.data.steps - 1);
    return this.go(Math.max(0, Math.min(this.data.steps - 1, this.step + d)));
  }

  async load() {
    const mine = ++this.req;
    if (!this.pid) {
      this.data = null;
      this.$("tiles-controls").hidden = true;
      for (const id of ["tiles-body", "tiles-legend", "tiles-hover"]) this.$(id).hidden = true;
      this.$("tiles-note").hidden = false;
      this.$("tiles-note").textContent = "Select a program (click it in the grid) to see its tiles.";
      this.$("tiles-title").textContent = "";
      this.$("tiles-panel").dataset.key = "";
      return;
    }
    const data = await this.api("tiles", { i: this.li, pid: this.pid, step: this.step });
    if (mine !== this.req || !data) return;
    this.data = data;
    this.draw();
  }

  draw() {
    const d = this.data, body = clear(this.$("tiles-body"));
    body.hidden = false;
    this.$("tiles-hover").hidden = false;
    this.$("tiles-hover").textContent = "";
    this.legend(d);
    this.$("tiles-controls").hidden = false;
    this.$("tiles-title").textContent = `program ${pidText(d.program)}` +
      (d.tensors_total > d.tensors.length ? ` · the first ${d.tensors.length} of ${d.tensors_total} tensors` : "");
    const [unit, units] = d.by === "trip" ? ["trip", "trips"] : ["access", "accesses"];
    this.$("tiles-step").textContent = d.step === null ? `all ${fmtNum(d.steps)} ${d.steps === 1 ? unit : units}`
      : `${unit} ${d.step} of ${fmtNum(d.steps)}`;
    this.$("tiles-prev").disabled = d.steps === 0 || d.step === 0;
    this.$("tiles-next").disabled = d.steps === 0 || d.step === d.steps - 1;
    this.$("tiles-all").disabled = d.step === null;
    this.$("tiles-colour").value = this.colour;
    const width = Math.max(160, Math.floor((body.clientWidth - 16 * (d.tensors.length - 1)) / Math.max(1, d.tensors.length)));
    this.tiles = d.tensors.map((tile, k) => this.drawTile(body, tile, k, width));
    const ops = d.ops.seq.map((s, k) => `${s} (line ${d.ops.line[k]})`);
    const notes = !d.tensors.length ? ["This program touched no tensor (or was not recorded)."] : [d.by === "trip"
      ? `${d.trips} trips of the loop, inferred from the lines that repeat (the trace records ops, not loop trips): the k-th run of a repeated load or store is trip k.`
      : "No line repeats, so no loop trips can be told apart: each step is one access (a load or store), in op order."];
    if (d.by === "trip" && d.outside) notes.push(`${d.outside} op(s) outside the loop are drawn as context.`);
    const coarse = this.tiles.find((t) => t.vals && !t.vals.exact), bare = this.tiles.find((t) => !t.vals);
    const values = this.colour === "value" && bare ? valueNote(null, `${bare.tile.name} in this step`) : coarse ? valueNote(coarse.vals) : "";
    if (values) notes.push(values);
    if (d.dropped.length) notes.push(`To stay small, this view left out: ${d.dropped.join(", ")}.`);
    if (d.step !== null && ops.length) notes.push(`This step: op${ops.length > 1 ? "s" : ""} ${ops.slice(0, 12).join(", ")}${ops.length > 12 ? ", …" : ""}.`);
    this.$("tiles-note").hidden = false;
    this.$("tiles-note").textContent = notes.join(" ");
    this.$("tiles-panel").dataset.key = `${d.program.join(",")}|${d.step ?? "all"}`;
  }

  legend(d) {
    const box = clear(this.$("tiles-legend"));
    const sw = (col, text) => { const s = h("span", { class: "swatch" }); s.style.background = rgb(col); return h("span", {}, s, text); };
    box.hidden = false;
    if (this.colour === "value") box.append(...valueKey(null), h("span", {}, "(each tile over its own range)"));
    else box.append(sw(KIND_COLOR[1], "loaded"), sw(KIND_COLOR[2], "stored"), sw(KIND_COLOR[3], "both"));
    if (d.step !== null) box.append(sw(CONTEXT, d.by === "trip" ? "touched in another trip or outside the loop" : "touched by another access"));
    box.append(sw(UNTOUCHED, "not touched by this program"));
    if (this.fed.size) box.append(h("span", { class: "mark-key" }, "▢ outlined: what fed the element picked in the Tensor view"));
  }

  drawTile(body, tile, k, width) {
    const pl = tile.plane, m = haloMargin(pl, tile.halo);
    const px = planePx(pl.cell_cols + m.left + m.right, pl.cell_rows + m.top + m.bottom, width - 4, 360);
    const canvas = h("canvas", { "data-tensor": tile.tensor }), vals = cellValues(tile.values, pl.cell_cols);
    const fig = h("figure", { class: "tile", "data-tensor": tile.tensor },
      h("h3", {}, `${tile.name} ${tile.shape.join("×") || "scalar"}`), h("div", { class: "tile-box" }, canvas),
      h("div", { class: "muted box" }, boxText(tile)),
      h("div", { class: "muted" }, `${fmtNum(tile.elements)} element(s) by ${tile.ops} op(s)` +
        (tile.oob_lanes ? ` · ⚠ ${fmtNum(tile.oob_lanes)} lane(s) outside the tensor` : "") +
        (pl.windowed ? ` · rows ${pl.origin[0]}–${pl.origin[0] + pl.rows - 1}, cols ${pl.origin[1]}–${pl.origin[1] + pl.cols - 1} shown` : "") +
        (pl.cell[0] * pl.cell[1] > 1 ? ` · each cell ${pl.cell[0]}×${pl.cell[1]} elements` : "") +
        (this.colour === "value" && vals ? ` · values ${fmtNum(vals.range[0])} to ${fmtNum(vals.range[1])}` : "")));
    body.append(fig);
    const W = pl.cell_cols * px, H = pl.cell_rows * px;
    const ctx = sizeCanvas(canvas, Math.max(1, W + (m.left + m.right) * px), Math.max(1, H + (m.top + m.bottom) * px));
    ctx.translate(m.left * px, m.top * px);
    ctx.fillStyle = rgb(UNTOUCHED);
    ctx.fillRect(0, 0, W, H);
    // runs of cells along rows: [first, count, ...], a rectangle per row they cross
    const fillRun = (first, count) => {
      for (let k = first; k < first + count;) {
        const r = Math.floor(k / pl.cell_cols), c0 = k % pl.cell_cols, n = Math.min(count - (k - first), pl.cell_cols - c0);
        ctx.fillRect(c0 * px, r * px, n * px, px);
        k += n;
      }
    };
    const kinds = new Uint8Array(pl.cell_rows * pl.cell_cols), share = new Float32Array(kinds.length);
    ctx.fillStyle = rgb(CONTEXT);
    for (const [first, count] of tile.context) { fillRun(first, count); kinds.fill(4, first, first + count); }
    for (const [first, count, kind, fill] of tile.cells) {
      const col = KIND_COLOR[kind] || KIND_COLOR[3];
      ctx.fillStyle = rgb(col.map((v, j) => Math.round(UNTOUCHED[j] + (v - UNTOUCHED[j]) * (0.3 + 0.7 * fill))));
      if (this.colour !== "value") fillRun(first, count);
      else for (let k = first; k < first + count; k++) {     // a cell at a time: each its own colour
        ctx.fillStyle = rgb(valueColour(vals ? vals.at(k) : null, vals ? vals.range : [0, 0]));
        ctx.fillRect((k % pl.cell_cols) * px, Math.floor(k / pl.cell_cols) * px, px, px);
      }
      kinds.fill(kind, first, first + count);
      share.fill(fill, first, first + count);
    }
    if (px >= 6) {
      ctx.strokeStyle = "#fff";
      ctx.beginPath();
      for (let x = px; x < W; x += px) { ctx.moveTo(x - 0.5, 0); ctx.lineTo(x - 0.5, H); }
      for (let y = px; y < H; y += px) { ctx.moveTo(0, y - 0.5); ctx.lineTo(W, y - 0.5); }
      ctx.stroke();
    }
    const marks = (this.fed.get(tile.tensor) || []).map((ix) => cellOf(pl, ix)).filter(Boolean);
    const drawn = drawEvidence(ctx, px, tile.halo, [...new Map(marks.map((c) => [c.join(), c])).values()]);
    Object.assign(canvas.dataset, { px: String(px), cellRows: String(pl.cell_rows), cellCols: String(pl.cell_cols), marks: String(drawn.marks),
      ox: String(m.left), oy: String(m.top), colour: this.colour });
    return { canvas, tile, kinds, share, px, m, vals };
  }

  hover(e) {
    const t = (this.tiles || []).find((x) => x.canvas === e.target);
    if (!t || !this.data) return;
    const pl = t.tile.plane, r = t.canvas.getBoundingClientRect();
    const cx = Math.floor((e.clientX - r.left) / t.px) - t.m.left, cy = Math.floor((e.clientY - r.top) / t.px) - t.m.top;
    if (cx < 0 || cy < 0 || cx >= pl.cell_cols || cy >= pl.cell_rows) return;
    const row = pl.origin[0] + cy * pl.cell[0], col = pl.origin[1] + cx * pl.cell[1];
    const kind = t.kinds[cy * pl.cell_cols + cx];
    let where;
    if (!t.tile.shape.length) where = `${t.tile.name}[()]`;
    else if (pl.wrap) where = `${t.tile.name}[${row * pl.wrap + col}]`;
    else {
      const ix = pl.index.slice();
      if (pl.row_dim !== null) ix[pl.row_dim] = row;
      ix[pl.col_dim] = col;
      where = `${t.tile.name}[${ix.join(", ")}]`;
    }
    const many = pl.cell[0] * pl.cell[1] > 1;
    const value = kind && kind !== 4 ? valueText(t.vals, cy * pl.cell_cols + cx) : "";
    const what = kind === 4 ? "touched in another step" : !kind ? "not touched by this program"
      : KIND_TEXT[kind] + (many ? ` · ${fmtPct(t.share[cy * pl.cell_cols + cx])} of the cell` : "") + (value ? ` · ${value}` : "");
    this.$("tiles-hover").textContent = `${where}${many ? " …" : ""}: ${what}`;
  }
}
