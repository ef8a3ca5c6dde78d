// The tensor view: the elements one op, one program or every program touched, on a 2-D plane.
import { clear, h, programColor, rampColor, sizeCanvas } from "./dom.js";
import { cellOf, drawEvidence, haloMargin, writersColor } from "./evidence.js";
import { finiteRange, pidOf, planePx } from "./layout.js";
import { showFed, showFeeds } from "./feeds.js";
import { DIFF, KIND_COLOR, SPECIAL, UNTOUCHED, hoverText, showTouches, tensorLegend } from "./tensorlegend.js";

export class TensorView {
  // api(route, values) -> payload | null and url(route, values) -> its URL (routes.js, through view.js)
  constructor($, api, url, onPick, onElement) {
    this.$ = $;
    this.link = url;
    this.onPick = onPick;   // (pid, seq): open a program's op (a line of the element's accesses)
    this.onElement = onElement;   // ({t, index}): an element was clicked (the host remembers it)
    this.pinned = null;     // {t, index}: the element whose accesses are listed, outlined
    this.colour = "auto";
    this.api = api;
    this.canvas = this.$("tensor-canvas");
    this.launch = null;     // LaunchPayload
    this.grid = [1, 1, 1];
    this.t = 0;
    this.mode = "all";
    this.pid = null;
    this.op = null;         // {seq, tensor} of the selected memory op
    this.planes = {};       // tensor -> {rows, cols, index, wrap}
    this.sticky = null;     // "all" once the user asked for all programs
    this.zoom = true;       // zoom a downsampled tensor to the selected op's or program's elements
    this.data = null;
    this.req = 0;
    this.touchReq = 0;
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => { this.$("tensor-hover").textContent = ""; });
    this.canvas.addEventListener("click", (e) => this.pick(e));
    this.$("tensor-colour").addEventListener("change", (e) => { this.colour = e.target.value; this.refresh(); });
    this.$("tensor-touches").addEventListener("click", (e) => {
      const li = e.target.closest("li[data-k]");
      if (!li || !this.touches) return;
      const k = Number(li.dataset.k), t = this.touches.touches;
      this.onPick(t.program[k], t.seq[k]);
    });
    this.$("tensor-feeds").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-f]");
      if (b) this.showFed(Number(b.dataset.f));
    });
    this.$("tensor").addEventListener("change", (e) => { this.t = Number(e.target.value); if (this.mode === "op") this.mode = "program"; this.refresh(); });
    for (const b of this.$("tensor-mode").querySelectorAll("button")) {
      b.addEventListener("click", () => {
        this.mode = b.dataset.mode;
        this.sticky = this.mode === "all" ? "all" : null;    // "all" stays while programs are clicked
        if (this.mode === "op" && this.op) this.t = this.op.tensor;
        this.refresh();
      });
    }
  }

  setLaunch(launch, index) {
    this.launch = launch;
    this.index = index;
    this.grid = launch.grid;
    this.planes = {};
    this.data = null;
    const sel = clear(this.$("tensor"));
    launch.tensors.name.forEach((n, i) => sel.append(h("option", { value: i }, `${n} ${launch.tensors.shape[i].join("×") || "scalar"}`)));
    this.t = 0;
    this.mode = "all";
    this.pid = null;
    this.op = null;
    this.diffs = new Map();      // tensor -> DiffPayload (with a compared trace)
    this.pinned = null;
    this.fed = null;        // {t, indices, k}: the elements that fed the pinned one, outlined on their tensor
    this.showTouches(null);
    this.showFeeds(null);
    const cs = clear(this.$("tensor-colour"));
    cs.append(h("option", { value: "auto" }, "by access"), h("option", { value: "program" }, "by program"),
      h("option", { value: "writers" }, "by writers (races)"), h("option", { value: "value" }, "by value"));
    if (launch.programs_in_flight) cs.append(h("option", { value: "wave" }, `by wave (${launch.programs_in_flight} programs at once)`));
    if (this.colour === "wave" && !launch.programs_in_flight) this.colour = "auto";
    if (this.compare) cs.append(h("option", { value: "diff" }, "by difference (compared trace)"));
    if (this.colour === "diff" && !this.compare) this.colour = "auto";
    cs.value = this.colour;
    this.focus = null;
  }

  // A finding's evidence to draw: {t, indices (view indices to outline), mode ("all" or null), colour}.
  // The tensor, mode and colour it asks for apply when its op is selected; null clears it.
  setFocus(focus) {
    this.focus = focus;
    if (focus && focus.t !== null) this.t = focus.t;
    if (focus && focus.colour) { this.colour = focus.colour; this.$("tensor-colour").value = focus.colour; }
  }

  // Called when the selected program or op changes; picks a sensible mode and tensor.
  select(pid, op) {
    this.pid = pid;
    this.op = op;
    if (op) { this.mode = this.focus && this.focus.mode && this.focus.t === op.tensor ? this.focus.mode : "op"; this.t = op.tensor; this.sticky = null; }
    else if (pid) this.mode = this.sticky === "all" ? "all" : "program";
    else this.mode = "all";
    return this.refresh();
  }

  plane() { return this.planes[this.t] || (this.planes[this.t] = {}); }

  // A place's view (the one the Storage panel it names sits beside): tensor t in ``mode`` ("op" falls back
  // to the program, or to all programs, when no op is selected).
  want(t, mode) {
    if (!this.launch || t >= this.launch.tensors.name.length) return null;
    if (this.t === t && this.mode === mode && this.data && this.data.tensor === t) return null;
    this.t = t;
    this.mode = mode;
    this.sticky = mode === "all" ? "all" : null;
    return this.refresh();
  }

  // The tensor route's values of a view of tensor t (routes.py: "tensor").
  request(mode, t, pid, op) {
    const pl = this.planes[t] || {};
    return { i: this.index, t, mode, program: mode !== "all" ? pid : null, op: mode === "op" ? op.seq : null,
             rows: pl.rows, cols: pl.cols, wrap: pl.wrap, index: pl.index, window: this.zoom && mode !== "all" ? "auto" : null };
  }

  // The URL select(pid, op) would fetch, for prefetching on hover; null when nothing would be fetched.
  urlFor(pid, op) {
    if (!this.launch || !this.launch.tensors.name.length) return null;
    if (op) return this.link("tensor", this.request("op", op.tensor, pid, op));
    return this.link("tensor", this.request(this.sticky === "all" ? "all" : "program", this.t, pid, null));
  }

  async refresh() {
    if (!this.launch || this.launch.tensors.name.length === 0) { this.$("tensor-note").textContent = "This launch has no tensor arguments."; return; }
    if (this.mode === "op" && !this.op) this.mode = this.pid ? "program" : "all";
    if (this.mode === "program" && !this.pid) this.mode = "all";
    this.buttons();
    this.$("tensor").value = String(this.t);
    const mine = ++this.req;
    const [data] = await Promise.all([this.api("tensor", this.request(this.mode, this.t, this.pid, this.op)), this.colour === "diff" ? this.loadDiff(this.t) : null]);
    if (mine !== this.req || data === null) return;
    this.data = data;
    this.controls();
    this.draw();
    if (this.onShown) this.onShown({ t: data.tensor, ...data.selection });    // the storage panel follows it
  }

  buttons() {
    for (const b of this.$("tensor-mode").querySelectorAll("button")) {
      const m = b.dataset.mode;
      b.disabled = (m === "op" && !this.op) || (m === "program" && !this.pid);
      b.setAttribute("aria-pressed", String(m === this.mode));
    }
  }

  controls() {
    const d = this.data, pl = d.plane, rank = d.shape.length, box = clear(this.$("plane-controls"));
    const change = (key, v) => { this.plane()[key] = v; this.refresh(); };
    if (this.mode !== "all" && (pl.windowed || pl.cell[0] * pl.cell[1] > 1)) {
      const z = h("button", { type: "button", class: "toggle", "aria-pressed": String(this.zoom), title: "draw only the selection's neighbourhood, element by element" }, "zoom to selection");
      z.addEventListener("click", () => { this.zoom = !this.zoom; this.refresh(); });
      box.append(z);
    }
    if (rank === 1) {
      const w = h("input", { type: "number", min: 1, max: d.shape[0], value: pl.wrap, title: "elements per row" });
      w.addEventListener("change", () => change("wrap", Math.max(1, Number(w.value) || 1)));
      box.append(h("label", {}, "row length", w));
    } else if (rank >= 2) {
      const dimSelect = (key, cur) => {
        const s = h("select", { "aria-label": key });
        for (let k = 0; k < rank; k++) s.append(h("option", { value: k }, `dim ${k} (${d.shape[k]})`));
        s.value = String(cur);
        s.addEventListener("change", () => {
          const other = key === "rows" ? pl.col_dim : pl.row_dim;
          if (Number(s.value) === other) { this.plane()[key === "rows" ? "cols" : "rows"] = key === "rows" ? pl.row_dim : pl.col_dim; }
          change(key, Number(s.value));
        });
        return s;
      };
      box.append(h("label", {}, "rows", dimSelect("rows", pl.row_dim)), h("label", {}, "cols", dimSelect("cols", pl.col_dim)));
      for (let k = 0; k < rank; k++) {
        if (k === pl.row_dim || k === pl.col_dim) continue;
        const inp = h("input", { type: "number", min: 0, max: d.shape[k] - 1, value: pl.index[k], "aria-label": `index of dim ${k}` });
        inp.addEventListener("change", () => {
          const idx = pl.index.slice();
          idx[k] = Math.min(d.shape[k] - 1, Math.max(0, Number(inp.value) || 0));
          change("index", idx);
        });
        box.append(h("label", {}, `dim ${k} =`, inp));
      }
    }
  }

  draw() {
    const d = this.data, pl = d.plane, cells = d.cells;
    const px = planePx(pl.cell_cols, pl.cell_rows, this.$("tensor-wrap").clientWidth - 4);
    this.px = px;
    const W = pl.cell_cols * px, H = pl.cell_rows * px, m = haloMargin(pl, d.halo);
    this.ox = m.left; this.oy = m.top;      // cells of halo before the plane (out-of-bounds lanes at negative offsets)
    const ctx = sizeCanvas(this.canvas, Math.max(W + (m.left + m.right) * px, 1), Math.max(H + (m.top + m.bottom) * px, 1));
    ctx.translate(m.left * px, m.top * px);
    // one pixel per cell, scaled up without smoothing
    const img = new ImageData(Math.max(1, pl.cell_cols), Math.max(1, pl.cell_rows)), buf = img.data;
    for (let i = 0; i < buf.length; i += 4) { buf[i] = UNTOUCHED[0]; buf[i + 1] = UNTOUCHED[1]; buf[i + 2] = UNTOUCHED[2]; buf[i + 3] = 255; }
    const [r0, c0] = pl.origin;
    if (pl.wrap && d.shape[0] % pl.wrap && pl.full[0] - 1 < r0 + pl.rows) {   // the wrapped view's short last row
      const tail = d.shape[0] % pl.wrap, row = Math.floor((pl.full[0] - 1 - r0) / pl.cell[0]);
      for (let c = Math.max(0, Math.ceil((tail - c0) / pl.cell[1])); c < pl.cell_cols; c++) buf.fill(255, (row * pl.cell_cols + c) * 4, (row * pl.cell_cols + c) * 4 + 4);
    }
    this.lookup = new Map();
    const byProgram = (this.colour === "program" || (this.colour === "auto" && d.selection.mode === "all")) && cells.program;
    const byWriters = this.colour === "writers" && cells.writers;
    // which wave of programs_in_flight programs (in launch order) touched the element first: GROUP_M's tiles
    const byWave = this.colour === "wave" && cells.program && this.launch.programs_in_flight;
    const byValue = this.colour === "value" ? this.valueRange() : null;
    const byDiff = this.colour === "diff" ? this.diffCells() : null;
    this.diffAt = byDiff;
    for (let i = 0; i < cells.cell.length; i++) {
      const c = cells.cell[i];
      this.lookup.set(c, i);
      let col = byDiff ? (byDiff.has(c) ? DIFF[this.diffKind(byDiff.get(c))] : DIFF.same)
        : byValue ? this.valueColor(cells.value ? cells.value[i] : null, byValue)
        : byWriters ? writersColor(cells.writers[i])
        : byWave ? programColor(Math.floor(cells.program[i] / byWave))
        : byProgram ? programColor(cells.program[i]) : KIND_COLOR[cells.kinds[i]] || KIND_COLOR[3];
      if (cells.fill) {     // downsampled: shade by the share of the cell's elements touched
        const a = 0.3 + 0.7 * cells.fill[i];
        col = col.map((v, k) => Math.round(UNTOUCHED[k] + (v - UNTOUCHED[k]) * a));
      }
      buf[c * 4] = col[0]; buf[c * 4 + 1] = col[1]; buf[c * 4 + 2] = col[2];
    }
    if (byDiff) for (const [c, k] of byDiff) {
      if (this.lookup.has(c)) continue;
      const col = DIFF[this.diffKind(k)];
      buf[c * 4] = col[0]; buf[c * 4 + 1] = col[1]; buf[c * 4 + 2] = col[2];
    }
    const off = document.createElement("canvas");
    off.width = img.width; off.height = img.height;
    off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, 0, 0, W, H);
    if (px >= 6) {        // white gaps between cells, as one path
      ctx.strokeStyle = "#fff";
      ctx.beginPath();
      for (let x = px; x < W; x += px) { ctx.moveTo(x - 0.5, 0); ctx.lineTo(x - 0.5, H); }
      for (let y = px; y < H; y += px) { ctx.moveTo(0, y - 0.5); ctx.lineTo(W, y - 0.5); }
      ctx.stroke();
    }
    const focus = this.focus && this.focus.t === d.tensor ? this.focus : null;
    const fed = this.fed && this.fed.t === d.tensor ? this.fed.indices : [];
    const outlined = (focus ? focus.indices : []).concat(this.pinned && this.pinned.t === d.tensor ? [this.pinned.index] : [], fed);
    this.marks = outlined.map((ix) => cellOf(pl, ix)).filter(Boolean);
    const drawn = drawEvidence(ctx, px, d.halo, this.marks);
    const ds = this.canvas.dataset;
    Object.assign(ds, { halo: String(drawn.halo), marks: String(drawn.marks), ox: String(m.left), oy: String(m.top),
      fed: fed.length ? String(this.fed.k) : "" });
    ds.key = [d.selection.mode, d.tensor, d.selection.program ? d.selection.program.join(",") : "", d.selection.op ?? ""].join("|");
    ds.px = String(px); ds.cellRows = String(pl.cell_rows); ds.cellCols = String(pl.cell_cols);
    ds.fr = String(pl.cell[0]); ds.fc = String(pl.cell[1]);
    ds.colour = byDiff ? "diff" : byValue ? "value" : byWriters ? "writers" : byWave ? "wave" : byProgram ? "program" : "access";
    tensorLegend(this);
    performance.mark("tt-tensor-painted");
  }

  hover(e) { if (this.data) this.$("tensor-hover").textContent = hoverText(this, e); }

  async loadDiff(t) {
    if (!this.diffs.has(t)) {
      const d = await this.api("diff", { i: this.index, t });
      if (d) this.diffs.set(t, d);
    }
    return this.diffs.get(t) || null;
  }

  // The compared trace's differences on this plane: cell -> element position in the DiffPayload.
  diffCells() {
    const diff = this.diffs.get(this.data.tensor), pl = this.data.plane, out = new Map();
    if (!diff) return null;
    const E = diff.elements, [fr, fc] = pl.cell, [r0, c0] = pl.origin;
    E.index.forEach((idx, k) => {
      if (!idx) return;
      let row, col;
      if (pl.wrap) { row = Math.floor(idx[0] / pl.wrap); col = idx[0] % pl.wrap; }
      else {
        for (let d = 0; d < idx.length; d++) if (d !== pl.row_dim && d !== pl.col_dim && idx[d] !== pl.index[d]) return;
        row = pl.row_dim !== null ? idx[pl.row_dim] : 0;
        col = idx.length ? idx[pl.col_dim] : 0;
      }
      const r = row - r0, c = col - c0;
      if (r < 0 || c < 0 || r >= pl.rows || c >= pl.cols) return;
      out.set(Math.floor(r / fr) * pl.cell_cols + Math.floor(c / fc), k);
    });
    return out;
  }

  diffKind(k) {
    const E = this.diffs.get(this.data.tensor).elements;
    return E.a_program[k] === null ? "only_b" : E.b_program[k] === null ? "only_a" : "differ";
  }

  // [lo, hi] of the finite values drawn, or null when the view has none (downsampled, or no values)
  valueRange() {
    const v = this.data && this.data.cells.value;
    if (!v) return null;
    return finiteRange(v) || (v.some((x) => typeof x === "string") ? [0, 0] : null);
  }

  valueColor(v, [lo, hi]) {
    if (v === null || v === undefined) return SPECIAL.none;
    if (typeof v === "string") return SPECIAL[v] || SPECIAL.nan;
    return rampColor("value", hi > lo ? (v - lo) / (hi - lo) : 0.5);
  }

  // The view index of the touched element under the pointer, or null (untouched, or a downsampled cell of
  // many elements).
  cellIndex(e) {
    const d = this.data;
    if (!d) return null;
    const pl = d.plane, r = this.canvas.getBoundingClientRect();
    const cx = Math.floor((e.clientX - r.left) / this.px) - this.ox, cy = Math.floor((e.clientY - r.top) / this.px) - this.oy;
    if (cx < 0 || cy < 0 || cx >= pl.cell_cols || cy >= pl.cell_rows || pl.cell[0] * pl.cell[1] !== 1) return null;
    if (!this.lookup.has(cy * pl.cell_cols + cx)) return null;
    const row = pl.origin[0] + cy, col = pl.origin[1] + cx;
    if (d.shape.length === 0) return [];
    if (pl.wrap) return [row * pl.wrap + col];
    const ix = pl.index.slice();
    if (pl.row_dim !== null) ix[pl.row_dim] = row;
    ix[pl.col_dim] = col;
    return ix;
  }

  // Click an element: every access to it, in execution order (who wrote it, with what).
  async pick(e) {
    const index = this.cellIndex(e);
    if (index === null) return;
    this.pin({ t: this.data.tensor, index });
    this.onElement(this.pinned);
    await this.touchesAt(this.data.tensor, index);
  }

  // Outline an element ({t, index}; null: none) on the drawn plane.
  pin(el) {
    const same = JSON.stringify(el) === JSON.stringify(this.pinned);
    this.pinned = el;
    if (!same && this.data) this.draw();
  }

  // A place's element: its tensor drawn (in the current mode), the element outlined, its accesses listed.
  async showElement(el) {
    this.pinned = el;
    if (this.t !== el.t || !this.data || this.data.tensor !== el.t) {
      if (this.mode === "op" && (!this.op || this.op.tensor !== el.t)) this.mode = this.pid ? "program" : "all";
      this.t = el.t;
      await this.refresh();
    } else this.draw();
    await this.touchesAt(el.t, el.index);
  }

  // Every access to the element, and the loads that fed it (a new element forgets the last one's outlines).
  async touchesAt(t, index) {
    const mine = ++this.touchReq;
    const [data, feeds] = await Promise.all([this.api("touches", { i: this.index, t, index }), this.api("feeds", { i: this.index, t, index })]);
    if (mine !== this.touchReq) return;
    if (this.fed) { this.fed = null; if (this.data) this.draw(); }
    if (data) this.showTouches(data);
    this.showFeeds(feeds);
  }

  showTouches(data) { showTouches(this, data); }
  showFeeds(data) { showFeeds(this, data); }

  showFed(k) { return showFed(this, k); }
  pidOf(lin) { return pidOf(lin, this.grid); }
}
