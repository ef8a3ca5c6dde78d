// Small multiples: every plane of a tensor of rank 3 or more along one outer dim, side by side in wrapping rows
// (PlanesPayload, triton_trace/view/planesview.py). A batch of matrices or a stack of heads shows its pattern
// only when the planes are seen together: which planes a program wrote, which it missed. Each panel is drawn
// as the single plane is (paint.js: the same colours, halo and outlines) and captioned with its index; a
// click opens it as the single plane.
import { clear, h } from "./dom.js";
import { haloMargin } from "./evidence.js";
import { paintPlane } from "./paint.js";
import { hoverText, tensorLegend } from "./tensorlegend.js";

export const DEFAULT_PLANES = 16;   // a 3-D tensor of at most this many planes opens as small multiples (limits.py's MULTIPLES_DEFAULT)
const MIN_PANEL_PX = 150;           // panels a row: as many of this width as fit
const GAP = 12;                     // between panels (style.css's .multiples gap)
const PANEL_HEIGHT = 240;

// Whether tensor t of the view ``v`` is drawn as small multiples: as the user chose, else for a 3-D tensor
// of at most DEFAULT_PLANES planes along the dim drawn as neither rows nor columns.
export function wantsPanels(v, t) {
  const shape = v.launch.tensors.shape[t], pl = v.planes[t] || {};
  if (shape.length < 3) return false;
  if (pl.multi !== undefined) return pl.multi;
  if (shape.length !== 3) return false;
  const rows = pl.rows ?? 1, cols = pl.cols ?? 2, outer = [0, 1, 2].find((k) => k !== rows && k !== cols);
  return shape[outer] > 0 && shape[outer] <= DEFAULT_PLANES;
}

// "mode|tensor|program|op": what the drawn view shows (the browser tests wait for it)
export function viewKey(d) {
  return [d.selection.mode, d.tensor, d.selection.program ? d.selection.program.join(",") : "", d.selection.op ?? ""].join("|");
}

// Every panel's values in one list (one colour scale across the panels), or null when a panel has none.
export function panelValues(d) {
  return d.panels.length && d.panels.every((p) => p.cells.value) ? d.panels.flatMap((p) => p.cells.value) : null;
}

// The single plane is drawn: the panels go.
export function showSingle(v) {
  v.canvas.hidden = false;
  const box = v.$("tensor-multiples");
  if (!box.hidden) { clear(box).hidden = true; delete box.dataset.key; }
}

export function drawPanels(v) {
  const d = v.data, box = clear(v.$("tensor-multiples")), n = d.panels.length;
  v.canvas.hidden = true;
  box.hidden = false;
  const width = Math.max(MIN_PANEL_PX, v.$("tensor-wrap").clientWidth - 4);
  const per = Math.max(1, Math.min(n, Math.floor((width + GAP) / (MIN_PANEL_PX + GAP))));
  const panelW = Math.floor((width - GAP * (per - 1)) / per);
  // one scale for every panel: the largest halo any of them needs
  const m = d.panels.map((p) => haloMargin(p.plane, p.halo));
  const extraC = Math.max(0, ...m.map((x) => x.left + x.right)), extraR = Math.max(0, ...m.map((x) => x.top + x.bottom));
  const pl0 = n ? d.panels[0].plane : null;
  const px = n ? Math.max(1, Math.min(24, Math.floor(Math.min(panelW / Math.max(1, pl0.cell_cols + extraC),
    PANEL_HEIGHT / Math.max(1, pl0.cell_rows + extraR))))) : 1;
  const outlined = v.outlined(d.tensor), hover = v.$("tensor-hover");
  v.panels = d.panels.map((p) => {
    const canvas = h("canvas", { "data-index": p.index });
    const fig = h("figure", { class: "panel", "data-index": p.index, tabindex: 0, title: `open dim ${d.dim} = ${p.index} as one plane` },
      h("figcaption", {}, `dim ${d.dim} = ${p.index}`), canvas);
    box.append(fig);
    const at = paintPlane(v, canvas, p, px, outlined);
    canvas.addEventListener("mousemove", (e) => { hover.textContent = hoverText(v, e, at); });
    canvas.addEventListener("mouseleave", () => { hover.textContent = ""; });
    fig.addEventListener("click", () => openPanel(v, p));
    fig.addEventListener("keydown", (e) => { if (e.key === "Enter") openPanel(v, p); });
    return at;
  });
  v.marks = v.panels.flatMap((at) => at.marks);
  Object.assign(box.dataset, { key: viewKey(d), first: String(d.first), count: String(n), total: String(d.total),
    colour: n ? v.panels[0].colour : "access" });
  tensorLegend(v, summary(d));
  const more = d.total - n - d.first, note = v.$("tensor-note");
  const parts = [`Small multiples: ${n} of the ${d.total} planes along dim ${d.dim}; click one to open it as a single plane.`];
  if (more > 0 || d.first > 0) parts.push(`${d.total - n} more plane(s) not drawn: step with ‹ › beside "planes ${d.first}–${d.first + n - 1} of ${d.total}".`);
  note.textContent = parts.concat(note.textContent ? [note.textContent] : []).join(" ");
  performance.mark("tt-tensor-painted");
}

// Open panel ``p`` as the single plane.
function openPanel(v, p) {
  Object.assign(v.plane(), { multi: false, index: p.plane.index.slice() });
  return v.refresh();
}

// What the legend reads of the panels, as if they were one plane: the first panel's cell size (every panel
// has it), every panel's programs, values and halo.
function summary(d) {
  const P = d.panels, every = (col) => P.length > 0 && P.every((p) => p.cells[col]);
  const plane = P.length ? P[0].plane : { windowed: false, cell: [1, 1], origin: [0, 0], full: [0, 0] };
  const cells = { program: every("program") ? P.flatMap((p) => p.cells.program) : undefined,
                  fill: every("fill") ? P.flatMap((p) => p.cells.fill) : undefined, value: panelValues(d) || undefined };
  const halo = { row: P.flatMap((p) => p.halo.row), col: P.flatMap((p) => p.halo.col), hidden: P.length ? Math.min(...P.map((p) => p.halo.hidden)) : 0 };
  return { ...d, plane, cells, halo };
}
