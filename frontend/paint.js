// One tensor plane's cells on a canvas, coloured as the tensor view colours them (by access, program, writers,
// wave, value or difference from a compared trace), with its halo and outlines: the single plane (tensor.js)
// and every small multiple (multiples.js) are drawn here, so a panel and the plane it opens agree cell by cell.
import { programColor, sizeCanvas } from "./dom.js";
import { cellOf, drawEvidence, haloMargin, writersColor } from "./evidence.js";
import { DIFF, KIND_COLOR, UNTOUCHED } from "./tensorlegend.js";

// Draw plane ``p`` ({plane, cells, halo}: a TensorPayload, or a PlanesPayload's panel) of the tensor view ``v``
// on ``canvas`` at ``px`` pixels a cell, outlining the view indices ``outlined``. Returns what a hover and a
// click need: {plane, cells, halo, canvas, px, ox, oy (halo cells before the plane), lookup (cell -> position
// in cells), diffAt, marks, colour}.
export function paintPlane(v, canvas, p, px, outlined) {
  const d = v.data, pl = p.plane, cells = p.cells, m = haloMargin(pl, p.halo);
  const W = pl.cell_cols * px, H = pl.cell_rows * px;
  const ctx = sizeCanvas(canvas, Math.max(W + (m.left + m.right) * px, 1), Math.max(H + (m.top + m.bottom) * px, 1));
  ctx.translate(m.left * px, m.top * px);
  // one pixel per cell, scaled up without smoothing
  const img = new ImageData(Math.max(1, pl.cell_cols), Math.max(1, pl.cell_rows)), buf = img.data;
  for (let i = 0; i < buf.length; i += 4) { buf[i] = UNTOUCHED[0]; buf[i + 1] = UNTOUCHED[1]; buf[i + 2] = UNTOUCHED[2]; buf[i + 3] = 255; }
  const [r0, c0] = pl.origin;
  if (pl.wrap && d.shape[0] % pl.wrap && pl.full[0] - 1 < r0 + pl.rows) {   // the wrapped view's short last row
    const tail = d.shape[0] % pl.wrap, row = Math.floor((pl.full[0] - 1 - r0) / pl.cell[0]);
    for (let c = Math.max(0, Math.ceil((tail - c0) / pl.cell[1])); c < pl.cell_cols; c++) buf.fill(255, (row * pl.cell_cols + c) * 4, (row * pl.cell_cols + c) * 4 + 4);
  }
  const lookup = new Map();
  const byProgram = (v.colour === "program" || (v.colour === "auto" && d.selection.mode === "all")) && cells.program;
  const byWriters = v.colour === "writers" && cells.writers;
  // which wave of programs_in_flight programs (in launch order) touched the element first: GROUP_M's tiles
  const byWave = v.colour === "wave" && cells.program && v.launch.programs_in_flight;
  const byValue = v.colour === "value" ? v.valueRange() : null;
  const byDiff = v.colour === "diff" ? v.diffCells(pl) : null;
  for (let i = 0; i < cells.cell.length; i++) {
    const c = cells.cell[i];
    lookup.set(c, i);
    let col = byDiff ? (byDiff.has(c) ? DIFF[v.diffKind(byDiff.get(c))] : DIFF.same)
      : byValue ? v.valueColor(cells.value ? cells.value[i] : null, byValue)
      : byWriters ? writersColor(cells.writers[i])
      : byWave ? programColor(Math.floor(cells.program[i] / byWave))
      : byProgram ? programColor(cells.program[i]) : KIND_COLOR[cells.kinds[i]] || KIND_COLOR[3];
    if (cells.fill) {     // downsampled: shade by the share of the cell's elements touched
      const a = 0.3 + 0.7 * cells.fill[i];
      col = col.map((x, k) => Math.round(UNTOUCHED[k] + (x - UNTOUCHED[k]) * a));
    }
    buf[c * 4] = col[0]; buf[c * 4 + 1] = col[1]; buf[c * 4 + 2] = col[2];
  }
  if (byDiff) for (const [c, k] of byDiff) {
    if (lookup.has(c)) continue;
    const col = DIFF[v.diffKind(k)];
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
  const marks = outlined.map((ix) => cellOf(pl, ix)).filter(Boolean);
  const drawn = drawEvidence(ctx, px, p.halo, marks);
  const colour = byDiff ? "diff" : byValue ? "value" : byWriters ? "writers" : byWave ? "wave" : byProgram ? "program" : "access";
  Object.assign(canvas.dataset, { halo: String(drawn.halo), marks: String(drawn.marks), ox: String(m.left), oy: String(m.top),
    px: String(px), cellRows: String(pl.cell_rows), cellCols: String(pl.cell_cols), fr: String(pl.cell[0]),
    fc: String(pl.cell[1]), colour });
  return { plane: pl, cells, halo: p.halo, canvas, px, ox: m.left, oy: m.top, lookup, diffAt: byDiff, marks, colour };
}
