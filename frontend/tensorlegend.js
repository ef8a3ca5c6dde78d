// The tensor view's legend, notes and hover line, and the list of accesses to a clicked element (tensor.js draws).
import { clear, fmtNum, gradientCss, h, pidText, programColor, rgb } from "./dom.js";
import { OOB_RED, WRITERS } from "./evidence.js";
import { fmtPct } from "./units.js";

const KIND_TEXT = { 1: "loaded", 2: "stored", 3: "loaded and stored" };
export const KIND_COLOR = { 1: [37, 99, 235], 2: [234, 88, 12], 3: [124, 58, 237] };
export const UNTOUCHED = [233, 236, 240];
// colour by value: viridis over the finite range; NaN, +Inf, -Inf and "no value recorded" apart from it
export const SPECIAL = { nan: [236, 72, 153], inf: [220, 38, 38], "-inf": [30, 27, 75], none: [156, 163, 175] };
// colour by difference from a compared trace: elements that agree are dimmed
export const DIFF = { same: [203, 213, 225], differ: [220, 38, 38], only_a: [234, 88, 12], only_b: [124, 58, 237] };

// ``d``: what is drawn (the TensorPayload, or multiples.js's summary of a PlanesPayload's panels).
export function tensorLegend(v, d = v.data) {
  const pl = d.plane, box = clear(v.$("tensor-legend"));
  const sw = (c, text) => { const s = h("span", { class: "swatch" }); s.style.background = rgb(c); return h("span", {}, s, text); };
  const range = v.colour === "value" ? v.valueRange() : null;
  const diff = v.colour === "diff" ? v.diffs.get(d.tensor) : null;
  if (diff) {
    box.append(h("span", {}, diff.differing + diff.only_a + diff.only_b
      ? `${fmtNum(diff.differing)} of ${fmtNum(diff.compared)} written element(s) differ from the compared trace` +
        (diff.truncated ? ` (the first ${fmtNum(diff.elements.index.length)} drawn)` : "")
      : `all ${fmtNum(diff.compared)} written element(s) equal the compared trace's`),
      sw(DIFF.differ, "differs"), sw(DIFF.only_a, `written only here (${diff.only_a})`),
      sw(DIFF.only_b, `written only there (${diff.only_b})`), sw(DIFF.same, "equal or not written"));
  } else if (range) {
    const bar = h("span", { class: "bar" });
    bar.style.background = gradientCss("value");
    box.append(h("span", {}, "value:"), h("span", {}, fmtNum(range[0])), bar, h("span", {}, fmtNum(range[1])),
      sw(SPECIAL.nan, "NaN"), sw(SPECIAL.inf, "+Inf"), sw(SPECIAL["-inf"], "-Inf"), sw(SPECIAL.none, "no value recorded"));
  } else if (v.colour === "value") {
    box.append(h("span", {}, d.cells.fill ? "values are drawn element by element: zoom in (or pick a program or an op)"
      : "no values were recorded for this view"));
  } else if (v.colour === "wave" && d.cells.program) {
    const F = v.launch.programs_in_flight, waves = [...new Set(d.cells.program.map((p) => Math.floor(p / F)))].sort((a, b) => a - b);
    box.append(h("span", {}, `colour = the wave of ${F} programs (in launch order) that first touched the element:`));
    if (waves.length <= 24) for (const w of waves) box.append(sw(programColor(w), `wave ${w}`));
    else box.append(h("span", {}, `${waves.length} waves`));
  } else if (v.colour === "writers") {
    box.append(h("span", {}, "written by:"), sw(WRITERS[0], "no program (read only)"), sw(WRITERS[1], "1 program"),
      sw(WRITERS[2], "2 programs"), sw(WRITERS[3], "3 or more"), h("span", {}, "(2 or more without an atomic: a race)"));
  } else if (d.selection.mode === "all" && d.cells.program) {
    const progs = [...new Set(d.cells.program)].sort((a, b) => a - b);
    box.append(h("span", {}, "colour = the first program that touched the element:"));
    if (progs.length <= 24) for (const lin of progs) box.append(sw(programColor(lin), pidText(v.pidOf(lin))));
    else box.append(h("span", {}, `${progs.length} programs`));
  }
  else box.append(sw(KIND_COLOR[1], "loaded"), sw(KIND_COLOR[2], "stored"), sw(KIND_COLOR[3], "both"));
  box.append(sw(UNTOUCHED, "not touched"));
  const what = d.selection.mode === "all" ? "all programs" : d.selection.mode === "program"
    ? `program ${pidText(d.selection.program)}` : `op ${d.selection.op} of program ${pidText(d.selection.program)}`;
  box.append(h("span", {}, `${d.name}: ${d.dtype} ${d.shape.join("×") || "scalar"}, strides (${d.strides.join(", ")}) · ${what}`));
  const notes = [];
  if (pl.windowed) notes.push(`Zoomed: rows ${pl.origin[0]}–${pl.origin[0] + pl.rows - 1}, columns ${pl.origin[1]}–${pl.origin[1] + pl.cols - 1} of ${pl.full[0]}×${pl.full[1]}.`);
  if (pl.cell[0] * pl.cell[1] > 1) notes.push(`Downsampled: each cell is ${pl.cell[0]}×${pl.cell[1]} elements, shaded by the share touched.`);
  if (d.elements_hidden) notes.push(`${fmtNum(d.elements_hidden)} touched element(s) are not drawn (another slice${pl.windowed ? " or outside the zoom" : ""}).`);
  if (d.oob_lanes) {
    const drawn = d.halo ? d.halo.row.length : 0, hidden = d.halo ? d.halo.hidden : 0;
    notes.push(`⚠ ${fmtNum(d.oob_lanes)} active lane(s) fall outside the tensor's storage (offsets ${d.oob_examples.join(", ")}…)` +
      (drawn ? `; drawn in red at their would-be cells past the tensor's end${hidden ? ` (${fmtNum(hidden)} offsets too far out to draw)` : ""}.` : "; too far out to draw."));
    box.append(sw(OOB_RED, "outside the tensor (would-be position)"));
  }
  if (v.marks && v.marks.length) {
    const fed = v.fed && v.fed.t === d.tensor && v.feeds;
    box.append(h("span", { class: "mark-key" }, fed ? `▢ outlined: the elements that fed ${v.feeds.name}[${v.feeds.index.join(", ")}]`
      : "▢ outlined: the finding's elements"));
  }
  if (d.dropped.length) notes.push(`To stay small, this view left out: ${d.dropped.join(", ")}.`);
  if (d.elements === 0 && !d.oob_lanes) notes.push("Nothing in this selection touches this tensor.");
  v.$("tensor-note").textContent = notes.join(" ");
}


export function showTouches(v, data) {
  const box = v.$("tensor-touches");
  v.touches = data;
  if (!data) { box.hidden = true; clear(box); delete box.dataset.index; return; }
  const T = data.touches, list = h("ol", { class: "scroll" });
  T.order.forEach((_, k) => {
    const val = T.value[k] === null ? "value not recorded" : `value ${fmtNum(T.value[k])}`;
    const via = T.tensor[k] !== data.name ? ` via ${T.tensor[k]}` : "";
    list.append(h("li", { "data-k": k, tabindex: 0, class: T.kind[k].startsWith("load") ? "r" : "w" },
      h("span", { class: "kind" }, T.kind[k]), ` program ${pidText(T.program[k])} · op ${T.seq[k]} · line ${T.line[k]}` +
      ` · lane (${T.lane[k].join(", ")})${via} · ${val}`));
  });
  clear(box).append(h("div", { class: "muted" }, `${data.name}[${data.index.join(", ")}] (storage offset ${data.offset}): ` +
    (data.total ? `${data.total} access(es), in execution order${data.truncated ? `, the first ${T.order.length} listed` : ""}; click one to open it` : "no recorded access")), list);
  box.dataset.index = data.index.join(",");
  box.hidden = false;
}

// What the tensor view's hover line says about the cell under the pointer (``v``: the TensorView; ``p``: the
// plane drawn there, as paint.js's paintPlane returns it: the single plane or one small multiple).
export function hoverText(v, e, p) {
  const d = v.data;
  const pl = p.plane, r = p.canvas.getBoundingClientRect(), H = p.halo;
  const cx = Math.floor((e.clientX - r.left) / p.px) - p.ox, cy = Math.floor((e.clientY - r.top) / p.px) - p.oy;
  const halo = H ? H.row.findIndex((row, k) => row === cy && H.col[k] === cx) : -1;
  if (halo >= 0) {
    return `storage offset ${H.offset[halo]}: outside '${d.name}' (storage ` +
      `0..${d.storage_size - 1}); an out-of-bounds lane's would-be element`;
  }
  if (cx < 0 || cy < 0 || cx >= pl.cell_cols || cy >= pl.cell_rows) return "";
  const [fr, fc] = pl.cell, [r0, c0] = pl.origin;
  let where;
  const idx = (row, col) => {
    if (d.shape.length === 0) return `${d.name}[()]`;
    if (pl.wrap) return `${d.name}[${row * pl.wrap + col}]`;
    const ix = pl.index.slice();
    if (pl.row_dim !== null) ix[pl.row_dim] = row;
    ix[pl.col_dim] = col;
    return `${d.name}[${ix.join(", ")}]`;
  };
  if (fr * fc === 1) where = idx(r0 + cy, c0 + cx);
  else where = `${idx(r0 + cy * fr, c0 + cx * fc)} … ${idx(r0 + Math.min(pl.rows, (cy + 1) * fr) - 1, c0 + Math.min(pl.cols, (cx + 1) * fc) - 1)}`;
  const cell = cy * pl.cell_cols + cx, i = p.lookup.get(cell);
  let diffText = "";
  if (p.diffAt && p.diffAt.has(cell)) {
    const E = v.diffs.get(d.tensor).elements, k = p.diffAt.get(cell);
    const side = (x, q, l) => q === null ? "not written" : `${fmtNum(x)} (program ${pidText(q)}, line ${l})`;
    diffText = ` · here ${side(E.a[k], E.a_program[k], E.a_line[k])} · compared ${side(E.b[k], E.b_program[k], E.b_line[k])}`;
  }
  if (i === undefined) return `${where} · not touched${diffText}`;
  const c = p.cells, parts = [where, KIND_TEXT[c.kinds[i]] || ""];
  if (c.value && c.value[i] !== null && c.value[i] !== undefined) parts.push(`value ${fmtNum(c.value[i])}`);
  if (c.fill) parts.push(`${fmtPct(c.fill[i])} of the cell touched`);
  if (c.lanes) parts.push(`${c.lanes[i]} lane(s)`);
  if (c.program) parts.push(`program ${pidText(v.pidOf(c.program[i]))}`);
  if (c.writer && c.writer[i] >= 0) parts.push(`last written by program ${pidText(v.pidOf(c.writer[i]))}`);
  if (c.programs && c.programs[i] > 1) parts.push(`${c.programs[i]} programs touched it`);
  return parts.join(" · ") + diffText;
}
