// The canvases' arithmetic, apart from the DOM: how the program grid, an op's block and a tensor plane are
// laid out, program ids to grid cells and back, the value range a colour scale spans. Pure functions, each
// tested on its own in Chromium (tests/view/test_frontend_js.py).

// The program grid's cells: a 1-D grid of many programs wraps into rows of a power of two (about square),
// cells of 3 to 36 pixels filling ``maxWidth``. {cols, rows, wrap (0: no wrap), px}
export function gridLayout(cols, rows, maxWidth = 356) {
  let wrap = 0;
  if (rows === 1 && cols > 64) {
    wrap = 2 ** Math.ceil(Math.log2(Math.sqrt(cols)));
    rows = Math.ceil(cols / wrap);
    cols = wrap;
  }
  const px = Math.max(3, Math.min(36, Math.floor(maxWidth / cols)));
  return { cols, rows, wrap, px };
}

// An op's block [rows, cols] of lanes in ``width`` pixels (at least 200): a 1-D block wraps into rows of a
// power of two lanes so no cell is under ``minPx``; a wide 2-D block keeps its rows (and scrolls sideways).
// {R, C, px, wrapped}
export function blockLayout(grid, width, minPx = 8) {
  const maxW = Math.max(200, width);
  let [R, C] = grid;
  if (R === 1 && C * minPx > maxW) { C = 2 ** Math.floor(Math.log2(maxW / minPx)); R = Math.ceil(grid[1] / C); }
  const px = Math.max(minPx / 2, Math.min(16, Math.floor(maxW / Math.max(1, C))));
  return { R, C, px, wrapped: C !== grid[1] };
}

// Pixels per cell of a tensor plane of cellRows x cellCols cells in ``width`` (at least 200) by ``height``:
// 1 to 24, the same along both axes.
export function planePx(cellCols, cellRows, width, height = 560) {
  const maxW = Math.max(200, width);
  return Math.max(1, Math.min(24, Math.floor(Math.min(maxW / Math.max(1, cellCols), height / Math.max(1, cellRows)))));
}

// The position in a block of ``shape`` of its flat lane ``k`` (row-major); [0] for a scalar.
export function unravel(k, shape) {
  const out = [];
  for (let i = shape.length - 1; i >= 0; i--) { out.unshift(k % shape[i]); k = Math.floor(k / shape[i]); }
  return out.length ? out : [0];
}

// A program's linear id in a launch grid [gx, gy, gz] (x fastest, as Triton numbers them), and back.
export function linearOf(pid, grid) { return pid[0] + grid[0] * (pid[1] + grid[1] * pid[2]); }
export function pidOf(lin, grid) {
  const [gx, gy] = grid;
  return [lin % gx, Math.floor(lin / gx) % gy, Math.floor(lin / (gx * gy))];
}

// The cell of a grid slice (GridPayload: {grid, block, cols, z}) that holds program ``lin``, or null when
// the program is in another z slice; a slice of many programs is drawn in blocks of bx x by programs.
export function cellOfProgram(lin, slice) {
  const [x, y, z] = pidOf(lin, slice.grid), [bx, by] = slice.block;
  if (z !== slice.z) return null;
  return Math.floor(y / by) * slice.cols + Math.floor(x / bx);
}

// The first program of cell ``c`` of a grid slice.
export function programOfCell(c, slice) {
  const [bx, by] = slice.block;
  return [(c % slice.cols) * bx, Math.floor(c / slice.cols) * by, slice.z];
}

// [lo, hi] of the finite numbers among ``values`` whose position passes ``keep`` (strings such as "nan" and
// "inf", nulls, NaN and infinities are left out); null when there is none.
export function finiteRange(values, keep = () => true) {
  let lo = Infinity, hi = -Infinity;
  values.forEach((x, k) => {
    if (typeof x === "number" && Number.isFinite(x) && keep(k)) { if (x < lo) lo = x; if (x > hi) hi = x; }
  });
  return lo <= hi ? [lo, hi] : null;
}
