"""The frontend's pure functions (frontend/*.js), case by case, in a real Chromium (Debian's, through
Playwright; no node, no server: the page's requests are answered from frontend/ by Playwright itself).

Every expected value is computed here in Python, apart from the JavaScript: by analysis/units.py (the
twin of units.js), colorsys (HSL), numpy (index arithmetic), html.escape, routes.py's own url(), zlib,
Decimal (JavaScript's number formatting, from its specification), or written out by hand.
"""
from __future__ import annotations

import colorsys
import html
import json
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest

from helpers.paths import ROOT
from triton_trace.analysis import units
from triton_trace.view import embed, routes

pytestmark = pytest.mark.browser

FRONTEND = Path(ROOT) / "frontend"
ORIGIN = "http://tt.test"          # never looked up: Playwright answers the page's every request
RUNNER = """async ({ module, fn, cases, adapter }) => {
  const m = await import(`/${module}.js`);
  const f = adapter ? (0, eval)(adapter)(m) : m[fn];
  if (typeof f !== "function") throw new Error(`${module}.js exports no function ${fn}`);
  const out = [];
  for (const args of cases) {
    try { const v = await f(...args); out.push(v === undefined ? { undefined: true } : { value: v }); }
    catch (e) { out.push({ error: String(e.message) }); }
  }
  return out;
}"""
RAISES, UNDEFINED = object(), object()
nan, inf = float("nan"), float("inf")


@pytest.fixture(scope="module")
def js(browser):
    ctx = browser.new_context()
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def serve(route):
        name = route.request.url[len(ORIGIN) + 1:]
        if name == "blank.html":
            route.fulfill(body="<!doctype html><html><body></body></html>", content_type="text/html")
        elif re.fullmatch(r"\w+\.js", name) and (FRONTEND / name).is_file():
            route.fulfill(path=str(FRONTEND / name), content_type="text/javascript")
        else:
            route.fulfill(status=404, body="")
    ctx.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/blank.html")

    def check(module: str, fn: str, table: list, adapter: str = None):
        """table: [(args, expected)]; expected RAISES for an error, UNDEFINED for undefined."""
        got = page.evaluate(RUNNER, {"module": module, "fn": fn, "cases": [list(a) for a, _ in table], "adapter": adapter})
        assert not errors, errors
        bad = [(args, want, g) for (args, want), g in zip(table, got) if not _same(want, g)]
        assert not bad, f"{module}.{fn}: {len(bad)} of {len(table)} cases differ: {bad[:8]}"
    yield check
    ctx.close()


def _same(want, got: dict) -> bool:
    if want is RAISES:
        return "error" in got
    if want is UNDEFINED:
        return got == {"undefined": True}
    return "value" in got and _eq(want, got["value"])


def _eq(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    if isinstance(a, (str, bool)) or a is None or isinstance(b, (str, bool)) or b is None:
        return type(a) is type(b) and a == b
    return a == b             # numbers: JavaScript has one kind


# --------------------------------------------------------------------------------------------------------
# JavaScript's number formatting, from the specification (Number.prototype.toPrecision, toExponential,
# Number::toString): the exact binary value, rounded half up on the magnitude
# --------------------------------------------------------------------------------------------------------
def _sig_digits(x: float, digits: int) -> tuple:
    """(digit string of ``digits`` digits, exponent e) with |x| ~ d.ddd * 10**e."""
    d = abs(Decimal(x))
    e = d.adjusted()
    n = d.scaleb(digits - 1 - e).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    if n >= 10 ** digits:           # 9.9996 -> 10.000: one more power of ten
        e += 1
        n = d.scaleb(digits - 1 - e).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return str(int(n)), e


def js_exponential(x: float, f: int) -> str:
    text, e = _sig_digits(x, f + 1)
    return f"{'-' if x < 0 else ''}{text[0]}{'.' + text[1:] if f else ''}e{'+' if e >= 0 else '-'}{abs(e)}"


def js_string(v: float) -> str:
    """Number::toString of a finite double of magnitude in [1e-3, 1e21): the shortest round trip, as repr."""
    return str(int(v)) if v.is_integer() else repr(v)


def js_precision_number(x: float, p: int) -> float:
    text, e = _sig_digits(x, p)
    return float(f"{'-' if x < 0 else ''}{text}e{e - p + 1}")


# --------------------------------------------------------------------------------------------------------
# units.js: the twin of analysis/units.py, string for string, edge cases included
# --------------------------------------------------------------------------------------------------------
NUMBERS = [0, -0.0, 1, -1, 0.000123456, 123456.7, 999.95, 999.5, 2.5, 1 / 3, 1e21, -2.5e22, 1e79, 1e-99, 5e-324,
           nan, inf, -inf, 12345.6, -0.0004]


def test_units_twin(js):
    js("units", "fmtSig", [((v,), units.sig(v)) for v in NUMBERS] +
       [((v, d), units.sig(v, d)) for v, d in ((0.125, 2), (-0.125, 2), (1 / 3, 9), (123.456, 0), (0.5, 0))] +
       [((1.7976931348623157e308,), str(int(1.7976931348623157e308)))])      # every digit of the largest double
    js("units", "fmtBytes", [((n,), units.nbytes(n)) for n in (None, 0, 999, 1000, 1500, 999_960, -1500, 5e12, 1e15,
                                                                  1e18, 0.5, nan, inf, -inf)])
    js("units", "fmtPct", [((s,), units.percent(s)) for s in (None, 0, 1 / 3, 1, 1.5, -0.25, 0.0004, nan)])
    js("units", "fmtSeconds", [((t,), units.seconds(t)) for t in (None, 0, 3.2e-8, 1e-6, 0.999999, 2.5, -0.004, 1e9)])
    fmts = {None: units.nbytes, "fmtPct": units.percent, "fmtSeconds": units.seconds, "fmtSig": units.sig}
    js("units", "fmtChange", [((a, b, f), units.change(a, b, fmts[f])) for a, b, f in
                              ((200_000, 200_100, None), (5, 5, None), (0, 1, None), (123_456_789, 123_456_790, None),
                               (0.333, 0.3334, "fmtPct"), (1e-9, 1.0001e-9, "fmtSeconds"), (1, 1 + 1e-12, "fmtSig"))],
       adapter="(m) => (a, b, f) => m.fmtChange(a, b, f ? m[f] : undefined)")
    js("units", "fmtMetric", [((k, v), units.metric(k, v)) for k, v in
                              (("load_bytes", 4096), ("masked_share", 0.375), ("sector_efficiency", 1), ("flops", 1234567),
                               ("flops", 1e15), ("flops", 1.5e21), ("x", 2.0), ("x", -1234), ("x", "text"), ("x", None),
                               ("arithmetic_intensity", 0.123456), ("x", nan), ("x", inf))])
    js("units", "place", [((f, n), units.place(f, n)) for f, n in
                          (("cell In[8]", 6), ("cell In[]", None), ("/a/b/kernel.py", 12), ("C:\\x\\k.py", 3),
                           (None, None), ("k.py", 0), ("cell In[8]x", 2))])


# --------------------------------------------------------------------------------------------------------
# dom.js: numbers as the tables show them, colour scales
# --------------------------------------------------------------------------------------------------------
def fmt_num(x) -> str:
    if x is None:
        return "\u2013"
    if isinstance(x, str):
        return x
    if math.isnan(x):
        return "NaN"
    if float(x).is_integer():
        return f"{int(x):,}"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if abs(x) < 1e-3 or abs(x) >= 1e6:
        return js_exponential(x, 3)
    return js_string(js_precision_number(x, 5))


VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129], [92, 200, 99],
           [170, 220, 50], [253, 231, 37]]          # matplotlib's viridis at 0, 1/8, ..., 1
REDS = [[254, 242, 242], [254, 202, 202], [252, 165, 165], [248, 113, 113], [239, 68, 68], [185, 28, 28], [127, 29, 29]]


def ramp(stops: list, t: float) -> list:
    t = 0.0 if math.isnan(t) else min(1.0, max(0.0, t))
    x = t * (len(stops) - 1)
    i = min(len(stops) - 2, math.floor(x))
    f = x - i
    return [math.floor(a + (b - a) * f + 0.5) for a, b in zip(stops[i], stops[i + 1])]


def half_up(v: float) -> int:
    return int(Decimal(v).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def test_dom_numbers_and_colours(js):
    js("dom", "fmtNum", [((x,), fmt_num(x)) for x in
                         (None, "abc", 0, 7, 1234567, -42, 1e20, 3.14159, 0.5, -0.5, 1.03125, 0.000123, 1234567.5,
                          999999.99, 0.001, 99999.5, 2.5e-7, -3.7e12, nan, inf, -inf)])
    js("dom", "pidText", [(([1, 2, 3],), "(1, 2, 3)"), (([],), "()"), (([0],), "(0)")])
    js("dom", "rgb", [(([1, 2, 3],), "rgb(1,2,3)"), (([0, 0, 0],), "rgb(0,0,0)")])
    js("dom", "colormap", [(("findings",), REDS), (("oob_lanes",), REDS), (("value",), VIRIDIS), (("load_bytes",), VIRIDIS)])
    ts = [-1, 0, 0.0625, 0.125, 0.3, 0.5, 0.99, 1, 2, nan, inf, -inf]
    js("dom", "rampColor", [(("value", t), ramp(VIRIDIS, t)) for t in ts] + [(("findings", t), ramp(REDS, t)) for t in ts])
    gradient = lambda stops: "linear-gradient(90deg," + ",".join(
        f"rgb({c[0]},{c[1]},{c[2]}) {half_up(100 * i / (len(stops) - 1))}%" for i, c in enumerate(stops)) + ")"
    js("dom", "gradientCss", [(("value",), gradient(VIRIDIS)), (("findings",), gradient(REDS))])
    hls = lambda lin: [half_up(v * 255) for v in colorsys.hls_to_rgb((lin * 137.508) % 360 / 360, (48 + lin % 3 * 8) / 100, 0.62)]
    js("dom", "programColor", [((lin,), hls(lin)) for lin in (0, 1, 2, 3, 7, 100, 4095, 12345)])


# --------------------------------------------------------------------------------------------------------
# layout.js (numpy for the index arithmetic), evidence.js, grid.js, charts.js
# --------------------------------------------------------------------------------------------------------
def grid_layout(cols: int, rows: int, width: int = 356) -> dict:
    wrap = 0
    if rows == 1 and cols > 64:
        wrap = 1
        while wrap * wrap < cols:          # the smallest power of two at least sqrt(cols)
            wrap *= 2
        cols, rows = wrap, -(-cols // wrap)
    return {"cols": cols, "rows": rows, "wrap": wrap, "px": max(3, min(36, width // cols))}


def block_layout(grid: list, width: float, min_px: int = 8) -> dict:
    max_w = max(200, width)
    r, c = grid
    if r == 1 and c * min_px > max_w:
        c = 1 << (int(max_w // min_px).bit_length() - 1)
        r = -(-grid[1] // c)
    return {"R": r, "C": c, "px": max(min_px / 2, min(16, math.floor(max_w / max(1, c)))), "wrapped": c != grid[1]}


def test_layout(js):
    js("layout", "gridLayout", [((c, r), grid_layout(c, r)) for c, r in
                                ((1, 1), (64, 1), (65, 1), (4096, 1), (1_000_000, 1), (200, 3), (10, 10), (8, 2))] +
       [((100, 1, 900), grid_layout(100, 1, 900))])
    js("layout", "blockLayout", [((g, w), block_layout(g, w)) for g, w in
                                 (([1, 16], 600), ([1, 4096], 600), ([32, 64], 600), ([4, 1000], 100), ([0, 0], 300),
                                  ([1, 100], 596), ([1, 1], -50))] + [(([1, 4096], 600, 4), block_layout([1, 4096], 600, 4))])
    plane_px = lambda c, r, w, h=560: max(1, min(24, math.floor(min(max(200, w) / max(1, c), h / max(1, r)))))
    js("layout", "planePx", [(a, plane_px(*a)) for a in ((64, 2, 600), (1, 1, 1000), (0, 0, 100), (10000, 10, 1500),
                                                          (100, 1000, 1200), (30, 30, 720, 90))])
    shapes = [(5, [2, 3]), (0, [2, 3]), (7, [8]), (23, [2, 3, 4]), (0, [1, 1, 1]), (65535, [256, 256])]
    js("layout", "unravel", [((k, s), [int(v) for v in np.unravel_index(k, s)]) for k, s in shapes] + [((0, []), [0])])
    grids = [[4, 3, 2], [65536, 1, 1], [1, 1, 1], [1 << 20, 1 << 10, 64]]
    lins = [(g, lin) for g in grids for lin in sorted({0, 1, int(np.prod(g)) - 1, int(np.prod(g)) // 2}) if lin < np.prod(g)]
    js("layout", "pidOf", [((lin, g), [int(v) for v in np.unravel_index(lin, g[::-1])][::-1]) for g, lin in lins])
    js("layout", "linearOf", [((p, g), int(np.ravel_multi_index(p[::-1], g[::-1]))) for g, lin in lins
                              for p in [[int(v) for v in np.unravel_index(lin, g[::-1])][::-1]]])
    slice_ = {"grid": [8, 4, 2], "block": [2, 2], "cols": 4, "z": 1}

    def cell_of(lin):               # by search: the cell whose block of programs holds it
        x, y, z = [int(v) for v in np.unravel_index(lin, (2, 4, 8))][::-1]
        return None if z != 1 else next(c for c in range(8) if (c % 4) * 2 <= x < (c % 4) * 2 + 2 and (c // 4) * 2 <= y < (c // 4) * 2 + 2)
    js("layout", "cellOfProgram", [((lin, slice_), cell_of(lin)) for lin in (0, 5, 31, 32, 33, 61, 63)])
    js("layout", "programOfCell", [((c, slice_), [(c % 4) * 2, (c // 4) * 2, 1]) for c in (0, 3, 4, 7)])
    values = [[], [1, 2, 3], ["nan", 5, None, -2, "inf"], [inf, 1], [nan], ["nan"], [-0.0, 0], [1e308, -1e308]]
    finite = lambda v, keep=None: (lambda xs: [min(xs), max(xs)] if xs else None)(
        [x for k, x in enumerate(v) if isinstance(x, (int, float)) and math.isfinite(x) and (keep is None or keep[k])])
    js("layout", "finiteRange", [((v, None), finite(v)) for v in values] +
       [(([5, 1, 9], [1, 1, 0]), [1, 5]), (([5, 1, 9], [0, 0, 0]), None)],
       adapter="(m) => (v, keep) => m.finiteRange(v, keep ? (k) => keep[k] : undefined)")


def test_storage_index(js):
    # storage.js: the logical index at a storage offset, against a search over every index of the view
    at = lambda off, sh, st, base: next((["*" if n > 1 and d == 0 else int(i) for i, n, d in zip(ix, sh, st)] for ix in
                                         np.ndindex(*sh) if base + sum(i * d for i, d in zip(ix, st)) == off), None)
    js("storage", "storageIndex", [((off, list(sh), list(st), b), at(off, sh, st, b)) for sh, st, b, offs in (
        ((6, 5), (8, 1), 0, range(-1, 50)), ((6, 5), (1, 6), 0, range(31)), ((4, 3), (8, 1), 17, range(64)),
        ((6, 5), (0, 1), 0, range(7)), ((2, 3, 4), (12, 1, 3), 0, range(25)), ((), (), 5, range(4, 7))) for off in offs])


WRITERS = [[191, 219, 254], [100, 116, 139], [249, 115, 22], [185, 28, 28]]


def test_evidence_grid_and_charts(js):
    js("evidence", "writersColor", [((n,), WRITERS[w]) for n, w in ((-1, 0), (0, 0), (1, 1), (2, 2), (3, 3), (7, 3),
                                                                     (2.7, 2), (nan, 0))])
    wrapped = {"wrap": 10, "row_dim": None, "col_dim": 0, "index": [0], "origin": [0, 0], "rows": 5, "cols": 10, "cell": [1, 1]}
    plane2 = {"wrap": 0, "row_dim": 0, "col_dim": 1, "index": [0, 0], "origin": [2, 4], "rows": 4, "cols": 4, "cell": [2, 2]}
    plane3 = {"wrap": 0, "row_dim": 1, "col_dim": 2, "index": [1, 0, 0], "origin": [0, 0], "rows": 8, "cols": 8, "cell": [1, 1]}
    flat = {"wrap": 0, "row_dim": None, "col_dim": 0, "index": [0], "origin": [0, 0], "rows": 1, "cols": 16, "cell": [1, 1]}
    scalar = {**flat, "index": [], "cols": 1}
    js("evidence", "cellOf", [((wrapped, [23]), [2, 3]), ((wrapped, [55]), None), ((plane2, [3, 5]), [0, 0]),
                              ((plane2, [5, 7]), [1, 1]), ((plane2, [1, 5]), None), ((plane2, [2, 8]), None),
                              ((plane3, [0, 0, 0]), None), ((plane3, [1, 2, 3]), [2, 3]), ((flat, [5]), [0, 5]),
                              ((flat, [16]), None), ((scalar, []), [0, 0])])
    pl = {"cell_rows": 3, "cell_cols": 4}
    js("evidence", "haloMargin", [((pl, None), {"top": 0, "left": 0, "bottom": 0, "right": 0}),
                                  ((pl, {"row": [-1, 0, 3], "col": [0, -2, 5]}), {"top": 1, "left": 2, "bottom": 1, "right": 2}),
                                  ((pl, {"row": [], "col": []}), {"top": 0, "left": 0, "bottom": 0, "right": 0})])
    rng = lambda **r: {"ranges": r}
    labels = [["load_bytes", "Loaded"], ["masked_share", "Masked"], ["sector_efficiency", "Eff"], ["oddity", "Odd"]]
    js("grid", "telling", [((rng(findings=[0, 2], load_bytes=[1, 1]), labels, True), "findings"),
                           ((rng(findings=[0, 0], masked_share=[0, 0.5]), labels, True), "masked_share"),
                           ((rng(findings=[0, 2], load_bytes=[1, 9]), labels, False), "load_bytes"),
                           ((rng(sector_efficiency=[0.5, 1], masked_share=[0, 1]), labels, False), "sector_efficiency"),
                           ((rng(sector_efficiency=[0.5, 1]), labels[:2], False), "load_bytes"),
                           ((rng(oddity=[0, 3], load_bytes=[2, 2]), labels, False), "oddity"),
                           ((rng(), [], False), "load_bytes")],
       adapter="(m) => (data, labels, has) => m.telling(data, new Map(labels), has)")
    js("charts", "plotlyText", [((s,), html.escape(str(s), quote=False)) for s in
                                ("<b>x</b>", "a & b", "&lt;", "", "plain", 'q"uote', 42)])


# --------------------------------------------------------------------------------------------------------
# places (places.js, compiled.js, navigate.js), written out by hand
# --------------------------------------------------------------------------------------------------------
def place(li=None, pid=None, op=None, el=None, compiled=None, storage=None, tiles=None):
    return {"view": "list"} if li is None else {"view": "launch", "li": li, "pid": pid, "op": op, "el": el,
                                                "storage": storage, "tiles": tiles, "compiled": compiled}


def cp(target="sm_90", stage="ttgir", file=None, line=None):
    return {"target": target, "stage": stage, "file": file, "line": line, "name": None}


PLACES = [(place(), "#/"), (place(2), "#/launch/2"), (place(0, [3, 1, 0]), "#/launch/0/program/3,1,0"),
          (place(0, [3, 1, 0], 5), "#/launch/0/program/3,1,0/op/5"), (place(0, [0, 0, 0], 0), "#/launch/0/program/0,0,0/op/0"),
          (place(1, None, None, {"t": 1, "index": [2, 3]}), "#/launch/1/element/1:2,3"),
          (place(1, None, None, {"t": 0, "index": []}), "#/launch/1/element/0:"),
          (place(0, None, None, None, cp("sm_80", "ptx", 0, 91)), "#/launch/0/compiled/sm_80/ptx/line/0:91"),
          (place(0, [1, 0, 0], 2, None, cp(line=12)), "#/launch/0/program/1,0,0/op/2/compiled/sm_90/ttgir/line/12"),
          (place(0, None, None, None, cp()), "#/launch/0/compiled/sm_90/ttgir"),
          (place(0, None, None, None, None, {"t": 2, "mode": "all"}), "#/launch/0/storage/2:all"),
          (place(1, [3, 0, 0], 4, {"t": 1, "index": [5]}, None, {"t": 1, "mode": "op"}, {"step": 2}),
           "#/launch/1/program/3,0,0/op/4/element/1:5/storage/1:op/tiles/2"),
          (place(0, [1, 0, 0], None, None, cp(), None, {"step": None}), "#/launch/0/program/1,0,0/tiles/all/compiled/sm_90/ttgir")]


def test_places(js):
    js("places", "placeKey", [((p,), key) for p, key in PLACES] + [(({"view": "launch", "li": 4, "pid": None, "op": 5},), "#/launch/4")])
    js("places", "parsePlace", [((key,), p) for p, key in PLACES] +
       [(("",), place()), (("#/launch/x",), place()), (("#/launch/0/program/1,2,3,4",), place()),
        (("#/launch/0/program/3",), place(0, [3, 0, 0])), (("#/launch/0/program/1,2/op/7/",), place(0, [1, 2, 0], 7)),
        (("#/launch/0/compiled/bogus",), place()), (("#/launch/0/compiled",), place(0, compiled=cp())),
        (("#/launch/-1",), place()), (("#/launch/0/program/-1",), place()),
        (("#/launch/0/storage/1:some",), place()), (("#/launch/0/tiles/2",), place(0)),     # no program: no tiles
        (("#/launch/0/tiles/x",), place()), (("#/launch/0/storage/1",), place())])
    js("compiled", "compiledKey", [((None,), ""), ((cp(),), "/compiled/sm_90/ttgir"), ((cp("sm_120", "ttir", None, 7),),
                                   "/compiled/sm_120/ttir/line/7"), ((cp(file=2, line=0),), "/compiled/sm_90/ttgir")])
    js("compiled", "parseCompiled", [(("",), None), (("/compiled",), cp()), (("/compiled/sm_120",), cp("sm_120")),
                                     (("/compiled/ptx",), cp(stage="ptx")), (("/compiled/sm_80/ttir/line/7",), cp("sm_80", "ttir", None, 7)),
                                     (("/compiled/sm_80/ttir/line/1:7",), cp("sm_80", "ttir", 1, 7)),
                                     (("/compiled/H100",), UNDEFINED), (("/compiledx",), UNDEFINED), (("/compiled/ptx/sm_80",), UNDEFINED)])
    js("navigate", "parseProgram", [(("3",), [3, 0, 0]), (("3,1",), [3, 1, 0]), (("(3, 1, 0)",), [3, 1, 0]),
                                    (("[4]",), [4, 0, 0]), ((" 7 , 2 ",), [7, 2, 0]), (("1,,2",), [1, 2, 0]), (("",), None),
                                    (("1,2,3,4",), None), (("-1",), None), (("1.5",), None), (("x",), None),
                                    (("\uff10",), None), (("()",), None), ((12,), [12, 0, 0])])


def test_compiled_panel_texts(js):
    r = {"num_warps": 4, "num_stages": 3, "shared_bytes": 0, "registers": 10, "spill_bytes": 0, "triton": "3.9.0",
         "occupancy": {"occupancy": 1, "programs_per_sm": 16, "warps_per_sm": 64, "limited_by": "warps"}}
    js("compiled", "resourcesText", [
        ((r,), "4 warps · 3 stages · 0 B shared memory · 10 registers per thread · no spills · occupancy 100% "
               "(16 programs, 64 warps per SM), limited by warps · Triton 3.9.0"),
        (({**r, "registers": None, "spill_bytes": None, "occupancy": {}, "shared_bytes": 49152},),
         "4 warps · 3 stages · 49.2 kB shared memory · registers unknown · spills unknown · occupancy unknown · Triton 3.9.0"),
        (({**r, "spill_bytes": 2048, "occupancy": None},),
         "4 warps · 3 stages · 0 B shared memory · 10 registers per thread · 2.05 kB spilled per thread · occupancy unknown · Triton 3.9.0")])
    js("compiled", "dotText", [(({"line": 48, "as": "fma", "count": 32},), "tl.dot at line 48 → FMA: no tensor cores, 32 instruction(s)"),
                               (({"line": 9, "as": "wgmma", "count": 4},), "tl.dot at line 9 → wgmma (Hopper warpgroup MMA), 4 instruction(s)"),
                               (({"line": 3, "as": None},), "tl.dot at line 3 → no MMA or FMA found in its PTX lines")])
    blocked = {"kind": "blocked", "order": [1, 0], "sizePerThread": [1, 4], "threadsPerWarp": [4, 8], "warpsPerCTA": [4, 1]}
    js("compiled", "layoutText", [((None,), "–"), (({},), "?"),
                                  ((blocked,), "blocked sizePerThread=[1,4] threadsPerWarp=[4,8] warpsPerCTA=[4,1] order=[1,0]"),
                                  (({"name": "mma", "versionMajor": 3, "instrShape": [16, 8], "extra": {"a": 1}},),
                                   'mma extra={"a":1} instrShape=[16,8] versionMajor=3')])


# --------------------------------------------------------------------------------------------------------
# routes.js against routes.py; embed.js's unpack against embed.py's pack
# --------------------------------------------------------------------------------------------------------
URLS = [("trace", {}), ("version", {}), ("launch", {"i": 3}), ("grid", {"i": 0, "z": 0}), ("grid", {"i": 1, "z": None}),
        ("program", {"i": 0, "pid": [2, 1, 0], "offset": None}), ("program", {"i": 0, "pid": [5], "offset": 2000}),
        ("tensor", {"i": 0, "t": 1, "mode": "op", "program": [2, 1, 0], "op": 1, "window": "auto"}),
        ("tensor", {"i": 2, "t": 0, "mode": "all", "rows": 0, "cols": 2, "wrap": 8, "index": [0, 3, 0]}),
        ("tensor", {"i": 0, "t": 0, "mode": "program", "program": [0, 0, 0], "index": []}),
        ("values_npy", {"i": 0, "t": 0, "mode": "program", "program": [1, 0, 0], "op": None}),
        ("block", {"i": 0, "pid": [0, 0, 0], "seq": 4}), ("compiled", {"i": 0, "target": "sm_80"}),
        ("diff", {"i": 0, "t": 2}), ("compare", {"i": 0}), ("touches", {"i": 0, "t": 0, "index": [1, 2]}),
        ("touches", {"i": 0, "t": 0, "index": []}), ("feeds", {"i": 0, "t": 2, "index": [5, 7]}),
        ("findings", {"i": 7}), ("charts", {"i": 7})]


def loop(loads, drain=134, line=11):
    return {"ir_line": 95, "end_line": 132, "file": 0, "line": line, "drain_line": drain,
            "loads": [{"file": 0, "line": ln, "prologue": p, "steady": s, "epilogue": e} for ln, p, s, e in loads]}


def test_pipeline_text(js):
    two = loop([(12, 2, 1, 0), (13, 2, 1, 0)])
    js("compiled", "pipelineText", [
        (([two], 3), "Software pipelined, 3 stages: the loop at line 11 (TTGIR 95–132) copies the loads of lines 12 and "
                     "13 ahead: before the loop 2 async copies each (prologue), inside it 1 each (steady state); its last "
                     "trips' copies are masked off and the wait at TTGIR line 134 drains the rest (epilogue)."),
        (([loop([(7, 1, 1, 1)], None, 5)], 2), "Software pipelined, 2 stages: the loop at line 5 (TTGIR 95–132) copies "
                                               "the load of line 7 ahead: before the loop 1 async copy (prologue), inside "
                                               "it 1 (steady state), after it 1 (epilogue, peeled)."),
        (([loop([(7, 2, 1, 0), (8, 1, 1, 0)], None)], 3), "Software pipelined, 3 stages: the loop at line 11 (TTGIR "
                                                          "95–132) copies the loads of lines 7 and 8 ahead: before the "
                                                          "loop 2 / 1 async copies (prologue), inside it 1 each (steady "
                                                          "state); its last trips' copies are masked off (epilogue)."),
        (([], 3), "num_stages = 3, but no loop's load became an async copy: nothing is software pipelined."),
        (([], 1), "")])


def runs(*r, count=None):
    return {"runs": [list(x) for x in r], "count": count or len(r)}


def test_feed_ranges(js):
    js("feeds", "rangesText", [(([runs((5, 5)), runs((0, 63))],), "row 5 · cols 0–63"),
                               (([runs((0, 63)), runs((7, 7))],), "rows 0–63 · col 7"),
                               (([runs((3, 3))],), "element 3"), (([runs((0, 3), (8, 11))],), "elements 0–3, 8–11"),
                               (([runs((0, 1), count=20)],), "elements 0–1, …"),
                               (([runs((1, 1)), runs((0, 2)), runs((4, 4))],), "dim 0 = 1 · dim 1 0–2 · dim 2 = 4"),
                               (([],), ""), ((None,), "")])


def test_small_multiples_and_cell_values(js):
    from triton_trace.view.limits import MULTIPLES_DEFAULT
    n = MULTIPLES_DEFAULT
    view = lambda shape, **pl: ({"launch": {"tensors": {"shape": [shape]}}, "planes": {0: pl}}, 0)
    js("multiples", "wantsPanels", [(view([n, 8, 16]), True), (view([n + 1, 8, 16]), False), (view([0, 8, 16]), False),
                                    (view([8, 16]), False), (view([2, 3, 4, 5]), False), (view([2, 3, 4, 5], multi=True), True),
                                    (view([2, 8, 16], multi=False), False), (view([40, 3, 2], rows=0, cols=2), True),
                                    (view([40, 3, 2]), False)])
    js("multiples", "viewKey", [(({"tensor": 2, "selection": {"mode": "op", "program": [1, 0, 0], "op": 3}},), "op|2|1,0,0|3"),
                                (({"tensor": 0, "selection": {"mode": "all", "program": None, "op": None}},), "all|0||")])
    panels = lambda *values: {"panels": [{"cells": {"value": v} if v is not None else {}} for v in values]}
    js("multiples", "panelValues", [((panels([1, 2], ["nan"]),), [1, 2, "nan"]), ((panels([1], None),), None),
                                    (({"panels": []},), None)])
    # runs [[0, 2], [5, 1]] of a value grid 4 blocks a row, blocks of 2 x 2 plane cells (a plane 8 cells a row)
    V = {"exact": False, "block": [2, 2], "cols": 4, "runs": [[0, 2], [5, 1]], "value": [1.5, "nan", -2]}
    js("cellvalues", "cellValues", [((V, 8, [0, 1, 9, 2, 3, 18, 27, 4, 16]), [1.5, 1.5, 1.5, "nan", "nan", -2, -2, None, None])],
       adapter="(m) => (V, cols, cells) => { const c = m.cellValues(V, cols); return cells.map((k) => c.at(k) ?? null); }")
    js("cellvalues", "cellValues", [((None, 8), None)])
    exact = {"exact": True, "block": [1, 1], "cols": 8, "runs": [[3, 1]], "value": [0.125]}
    js("cellvalues", "valueText", [((exact, 8, 3), "value 0.125"), ((exact, 8, 4), ""), ((V, 8, 9), "mean 1.5 of a 2×2 block of cells"),
                                   ((V, 8, 2), "mean nan of a 2×2 block of cells"), ((None, 8, 0), "")],
       adapter="(m) => (V, cols, cell) => m.valueText(m.cellValues(V, cols), cell)")
    js("cellvalues", "valueColour", [((None, [0, 1]), [156, 163, 175]), (("nan", [0, 1]), [236, 72, 153]),
                                     (("inf", [0, 1]), [220, 38, 38]), (("-inf", [0, 1]), [30, 27, 75]),
                                     ((0, [0, 1]), [68, 1, 84]), ((1, [0, 1]), [253, 231, 37]), ((3, [3, 3]), [33, 144, 141])])
    js("cellvalues", "valueNote", [((None, "x"), "No values were recorded for x."), (({"block": [1, 1]},), ""),
                                   (({"block": [2, 4]},), "Values are downsampled to stay small: each is the mean of a 2×4 "
                                                          "block of cells (NaN or Inf if any element is).")])


def test_log_axis_ticks(js):
    prefixes = dict(zip(range(-8, 9), ["y", "z", "a", "f", "p", "n", "μ", "m", "", "k", "M", "G", "T", "P", "E", "Z", "Y"]))
    label = lambda e: f"{10 ** (e % 3)}{prefixes[e // 3]}" if e // 3 in prefixes else f"1e{e}"
    cases = [((0.5, 2e15), range(-1, 17)), ((1e-26, 1e-24), range(-26, -23)), ((3e20, 5e26), range(20, 28))]
    js("charts", "logTicks", [(args, {"tickmode": "array", "tickvals": [10.0 ** e for e in es], "ticktext": [label(e) for e in es]})
                              for args, es in cases])


def test_routes_and_unpack(js):
    table = routes.frontend_table()
    js("routes", "apiUrl", [((table, n, v), routes.url(n, **v)) for n, v in URLS] +
       [((table, "nothing", {}), RAISES), ((table, "block", {"i": 0, "seq": 1}), RAISES),
        ((table, "grid", {"i": 0, "zz": 1}), RAISES), ((table, "launch", {"i": None}), RAISES)])
    js("routes", "pageRoutes", [(({"dataset": {"ttRoutes": json.dumps(table)}},), table), (({"dataset": {}},), RAISES)])
    bodies = [{}, {"a": [1, 2, 3]}, {"text": "π ≤ ∞ <script>"}, {"cells": list(range(5000)), "name": "x" * 10_000}]
    js("embed", "unpack", [((embed.pack(json.dumps(b)),), b) for b in bodies] + [(("not base64!",), RAISES)])


# --------------------------------------------------------------------------------------------------------
# every exported function is covered above, or says why it is not pure
# --------------------------------------------------------------------------------------------------------
DOM_BOUND = {"scoped", "h", "clear", "sizeCanvas", "setPanelOpen", "scrollIntoBox", "embed", "drawEvidence", "installNavigation",
             "tensorLegend", "showTouches", "mount", "showFeeds", "showFed", "hoverText", "paintPlane", "tensorChoices",
             "planeControls", "showSingle", "drawPanels", "valueKey"}      # they build elements or draw on a canvas: the browser tests'


def test_every_exported_function_is_covered_or_dom_bound():
    source = Path(__file__).read_text(encoding="utf-8")
    tested = set(re.findall(r'js\("\w+", "(\w+)"', source))
    exported = set()
    for path in FRONTEND.glob("*.js"):
        text = path.read_text(encoding="utf-8")
        exported |= set(re.findall(r"^export (?:async )?function (\w+)", text, re.M))
        exported |= set(re.findall(r"^export const (\w+) = (?:\([^)]*\)|\w+) =>", text, re.M))
    assert exported - DOM_BOUND <= tested, sorted(exported - DOM_BOUND - tested)
    assert not (tested & DOM_BOUND) and DOM_BOUND <= exported
