// The tensor view: the elements one op, one program or every program touched, on a 2-D plane.
import { rampColor } from "./dom.js";
import { finiteRange, pidOf, planePx } from "./layout.js";
import { showFed, showFeeds } from "./feeds.js";
import { drawPanels, panelValues, showSingle, viewKey, wantsPanels } from "./multiples.js";
import { paintPlane } from "./paint.js";
import { planeControls, tensorChoices } from "./planecontrols.js";
import { SPECIAL, hoverText, showTouches, tensorLegend } from "./tensorlegend.js";

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
    tensorChoices(this, launch);
    this.t = 0;
    this.mode = "all";
    this.pid = null;
    this.op = null;
    this.diffs = new Map();      // tensor -> DiffPayload (with a compared trace)
    this.pinned = null;
    this.fed = null;        // {t, indices, k}: the elements that fed the pinned one, outlined on their tensor
    this.showTouches(null);
    this.showFeeds(null);
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

  // The route ("tensor", or "planes" for small multiples) and its values for a view of tensor t (routes.py).
  request(mode, t, pid, op) {
    const pl = this.planes[t] || {}, sel = { i: this.index, t, mode, program: mode !== "all" ? pid : null, op: mode === "op" ? op.seq : null };
    if (wantsPanels(this, t)) return ["planes", { ...sel, rows: pl.rows, cols: pl.cols, dim: pl.dim, index: pl.index, first: pl.first }];
    return ["tensor", { ...sel, rows: pl.rows, cols: pl.cols, wrap: pl.wrap, index: pl.index, window: this.zoom && mode !== "all" ? "auto" : null }];
  }

  // The URL select(pid, op) would fetch, for prefetching on hover; null when nothing would be fetched.
  urlFor(pid, op) {
    if (!this.launch || !this.launch.tensors.name.length) return null;
    if (op) return this.link(...this.request("op", op.tensor, pid, op));
    return this.link(...this.request(this.sticky === "all" ? "all" : "program", this.t, pid, null));
  }

  async refresh() {
    if (!this.launch || this.launch.tensors.name.length === 0) { this.$("tensor-note").textContent = "This launch has no tensor arguments."; return; }
    if (this.mode === "op" && !this.op) this.mode = this.pid ? "program" : "all";
    if (this.mode === "program" && !this.pid) this.mode = "all";
    this.buttons();
    this.$("tensor").value = String(this.t);
    const mine = ++this.req;
    const [data] = await Promise.all([this.api(...this.request(this.mode, this.t, this.pid, this.op)), this.colour === "diff" ? this.loadDiff(this.t) : null]);
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

  controls() { planeControls(this); }

  // The view indices outlined on tensor ``t``: the finding's elements, the pinned element, what fed it.
  outlined(t) {
    const focus = this.focus && this.focus.t === t ? this.focus.indices : [];
    const fed = this.fed && this.fed.t === t ? this.fed.indices : [];
    return focus.concat(this.pinned && this.pinned.t === t ? [this.pinned.index] : [], fed);
  }

  draw() {
    const d = this.data;
    if (d.panels) { drawPanels(this); return; }
    showSingle(this);
    const pl = d.plane;
    const px = planePx(pl.cell_cols, pl.cell_rows, this.$("tensor-wrap").clientWidth - 4);
    const at = paintPlane(this, this.canvas, d, px, this.outlined(d.tensor));
    Object.assign(this, { px, ox: at.ox, oy: at.oy, lookup: at.lookup, diffAt: at.diffAt, marks: at.marks, at });
    const ds = this.canvas.dataset;
    ds.fed = this.fed && this.fed.t === d.tensor && this.fed.indices.length ? String(this.fed.k) : "";
    ds.key = viewKey(d);
    tensorLegend(this);
    performance.mark("tt-tensor-painted");
  }

  hover(e) { if (this.data && !this.data.panels) this.$("tensor-hover").textContent = hoverText(this, e, this.at); }

  async loadDiff(t) {
    if (!this.diffs.has(t)) {
      const d = await this.api("diff", { i: this.index, t });
      if (d) this.diffs.set(t, d);
    }
    return this.diffs.get(t) || null;
  }

  // The compared trace's differences on this plane: cell -> element position in the DiffPayload.
  diffCells(pl) {
    const diff = this.diffs.get(this.data.tensor), out = new Map();
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
    const d = this.data, v = d && (d.panels ? panelValues(d) : d.cells.value);
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
    if (!d || d.panels) return null;
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
