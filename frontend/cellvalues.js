// The recorded values on the Storage and Tiles panels' cells (the ``values`` of StoragePayload and of each
// TilesPayload tensor, triton_trace/view/cellvalues.py): the hover's "value …", written as the tensor view's
// hover writes it, and the "by value" colouring, viridis over the finite range with NaN, +Inf and -Inf in the
// tensor view's colours. Past a bound of cells the server sends a value per block of cells (their mean).
import { fmtNum, gradientCss, h, rampColor, rgb } from "./dom.js";
import { finiteRange } from "./layout.js";
import { SPECIAL } from "./tensorlegend.js";

// {at(cell) -> the value drawn at a plane cell (undefined: none), range: [lo, hi] of the finite ones, exact,
// block}, or null without values. ``cellCols``: the plane's cells a row.
export function cellValues(V, cellCols) {
  if (!V) return null;
  const byCell = new Map();
  let j = 0;
  for (const [first, count] of V.runs) for (let k = first; k < first + count; k++) byCell.set(k, V.value[j++]);
  const [br, bc] = V.block;
  const at = (cell) => byCell.get(Math.floor(Math.floor(cell / cellCols) / br) * V.cols + Math.floor((cell % cellCols) / bc));
  return { at, range: finiteRange(V.value) || [0, 0], exact: V.exact, block: V.block };
}

export function valueColour(v, range) {
  if (v === null || v === undefined) return SPECIAL.none;
  if (typeof v === "string") return SPECIAL[v] || SPECIAL.nan;
  const [lo, hi] = range;
  return rampColor("value", hi > lo ? (v - lo) / (hi - lo) : 0.5);
}

// "value 1.25" (one element's), "mean 1.25 of a 2×4 block of cells" (downsampled), "" (none there)
export function valueText(vals, cell) {
  const v = vals ? vals.at(cell) : undefined;
  if (v === undefined || v === null) return "";
  if (vals.exact) return `value ${fmtNum(v)}`;
  const [br, bc] = vals.block;
  return br * bc > 1 ? `mean ${fmtNum(v)} of a ${br}×${bc} block of cells` : `mean ${fmtNum(v)} of the cell's elements`;
}

// The legend's entries for the "by value" colouring over ``range``.
export function valueKey(range) {
  const sw = (c, text) => { const s = h("span", { class: "swatch" }); s.style.background = rgb(c); return h("span", {}, s, text); };
  const bar = h("span", { class: "bar" });
  bar.style.background = gradientCss("value");
  const ends = range ? [h("span", {}, fmtNum(range[0])), bar, h("span", {}, fmtNum(range[1]))] : [bar];
  return [h("span", {}, "value:"), ...ends, sw(SPECIAL.nan, "NaN"), sw(SPECIAL.inf, "+Inf"), sw(SPECIAL["-inf"], "-Inf"),
    sw(SPECIAL.none, "no value recorded")];
}

// What the panel's note says of its values: none recorded, or downsampled to blocks.
export function valueNote(vals, what) {
  if (!vals) return `No values were recorded for ${what}.`;
  const [br, bc] = vals.block;
  return br * bc > 1 ? `Values are downsampled to stay small: each is the mean of a ${br}×${bc} block of cells (NaN or Inf if any element is).` : "";
}
