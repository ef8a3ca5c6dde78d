"""The browser contract: every JSON endpoint of the web app and the payload it returns.

All payloads are columnar (parallel lists, strings sent once) and bounded, whatever the trace's size.
Every request may fail with a 4xx ``ErrorPayload``; the server never answers a bad request with a 500.
A shared server (``launch(share=True)``) also wants its access token on every request: ``?token=`` once,
after which the ``tt_token`` cookie it sets carries it; without it every route answers 403.
Every ``/api/`` request also carries ``X-TT-Client: 1`` (a header a page of another site cannot send
without a preflight this server never grants) and is refused when the browser's ``Sec-Fetch-Site`` names
another site, so no other page can make this server compile or read a trace.

``GET /api/trace`` -> ``TracePayload``
    The launches, columnar: kernel name, grid, programs recorded / left out, op count, findings count,
    completed flag and error; the op-kind names, the grid metrics offered (``METRICS``) and whether the
    analysis ran.
``GET /api/version`` -> ``{"watching": bool, "version": int, "error": str | None}`` (reload.py)
    Served from a trace file, the app reloads it when it changed; ``version`` counts the reloads, so the
    page reloads itself when it grows. ``watching`` is false for a trace passed as an object.
``GET /api/launch/<i>`` -> ``LaunchPayload``
    One launch: arguments, config, the tensor table (with bytes loaded / stored and predicted DRAM bytes
    per tensor), the kernel source (at most ``MAX_SOURCE_LINES`` of ``MAX_LINE_CHARS``) with per-line
    numbers over all programs for its margin, and the analysis metrics of the launch.
``GET /api/launch/<i>/grid?z=<k>`` -> ``GridPayload``
    Every ``METRICS`` value per program of the z-slice ``k`` (default 0), as flat row-major (y, x)
    columns; ``null`` for programs that recorded nothing. Slices of more than ``MAX_GRID_CELLS`` programs
    are reduced to blocks of ``block = [bx, by]`` programs (sums for counts, means for shares).
    ``ranges`` spans the whole launch, so colours agree across slices.
``GET /api/launch/<i>/program/<x>,<y>,<z>?offset=&limit=`` -> ``ProgramPayload``
    One program's ops in execution order (memory and compute), at most ``MAX_OPS`` per page: seq, kind,
    tensor, file, line, block shape, lanes active / total, bytes, 32-byte sectors and sector efficiency
    (the analysis' warp model), out-of-bounds lanes; the program's metrics and its findings.
``GET /api/launch/<i>/tensor/<t>?mode=&program=&op=&rows=&cols=&index=&wrap=&window=`` -> ``TensorPayload``
    The elements of tensor ``t`` touched by ``mode=op`` (op ``op`` of ``program``), ``mode=program`` (every
    op of ``program``) or ``mode=all`` (every program; the default), on a 2-D plane of the view: view dims
    ``rows`` and ``cols`` (default the last two), the other dims fixed by ``index`` (comma separated, one
    entry per dim; default: the slice of the selection's first element), a 1-D view wrapped every
    ``wrap`` elements (default: the kernel's block size, else about square). ``window=r0,r1,c0,c1``
    draws a rectangle of the plane; ``window=auto`` zooms to the selection when the whole plane would be
    downsampled.
    Storage offsets are mapped to view indices through the recorded shape, strides and storage offset.
    Sparse cells, at most ``tensormap.MAX_CELLS`` of them, each ``cell = [fr, fc]`` elements; the whole
    answer stays under ``tensorview.MAX_TENSOR_BYTES`` (about 1 MB), dropping the columns it names in
    ``dropped`` if it must.
``GET /api/launch/<i>/planes/<t>?mode=&program=&op=&rows=&cols=&dim=&index=&first=`` -> ``PlanesPayload`` (planesview.py)
    Small multiples of a tensor of rank 3 or more: the planes ``first``, ``first + 1``, ... of dim ``dim``
    (default: the first dim drawn as neither rows nor columns), at most ``MAX_PANELS``, each the tensor
    route's plane (rows, cols, the other dims fixed by ``index``) with its cells and halo, downsampled to a
    share of ``MAX_PLANE_CELLS``; the selection as for the tensor route. Bounded as the tensor route is.
``GET /api/launch/<i>/storage/<t>?mode=&program=&op=&wrap=&window=`` -> ``StoragePayload`` (storageview.py)
    Tensor ``t``'s storage in storage order, ``wrap`` elements a row (default: the row pitch, the smallest
    stride above 1): its shape, strides, storage offset and element size, the view's ``layout`` (the span of
    offsets it reaches, the storage elements its logical elements cover, the padding before, between and
    after them, expanded and reordered dims), which drawn elements it covers (``cover``: runs of cells), and
    the elements the selection (as for the tensor route; arguments aliasing the storage included) read and
    wrote, with out-of-bounds lanes in a ``halo`` past the storage's ends. Bounded as the tensor route is.
``GET /api/launch/<i>/tiles/<x>,<y>,<z>?step=`` -> ``TilesPayload`` (tilesview.py)
    One program's tiles in every tensor it accessed (in order of first access, at most
    ``MAX_TILE_TENSORS``), each on its own plane (the whole tensor, or a window around what the program
    touched past ``MAX_TILE_CELLS`` cells): the cells of step ``step`` (default: every step) and the rest
    of the program's cells as context. Steps are the loop's trips, inferred from lines that repeat
    (``by: "trip"``), or the program's memory ops in op order when no line repeats (``by: "op"``).
``GET /api/launch/<i>/block/<x>,<y>,<z>/<seq>`` -> ``BlockPayload`` (blockview.py)
    One op's block in its own shape: every lane's offset, active flag, out-of-bounds flag, view index
    and value (at most ``MAX_BLOCK_LANES`` lanes).
``GET /api/launch/<i>/compiled?target=sm_90`` -> ``CompiledPayload`` (compiledview.py)
    The kernel compiled for a GPU target on the server (no GPU needed): TTIR, TTGIR and PTX with the source
    line of each IR line, the memory ops' layouts, instructions and vector widths, and the resources.
``GET /api/launch/<i>/diff/<t>`` -> ``DiffPayload`` (with a compared trace: ``launch(compare=)``)
    The elements of tensor ``t`` whose final values differ from the compared trace's launch ``i`` (or
    that only one side wrote), at most ``MAX_DIFF_ELEMENTS``, each with both values and both writers.
``GET /api/launch/<i>/tensor/<t>/values.npy?mode=&program=&op=`` -> a NumPy ``.npy`` file (download.py)
    Tensor ``t`` in its view shape, float64: the last value the selection recorded per element, NaN where
    none; 413 past ``download.MAX_NPY_ELEMENTS`` elements.
``GET /api/launch/<i>/compare`` -> ``ComparePayload`` (with a compared trace)
    Launch ``i`` against the compared trace's launch ``i``, both analysed alike: the metrics that changed
    and the findings only one side has (by kind, tensor and program), at most ``compareview.MAX_LISTED``.
``GET /api/launch/<i>/touches/<t>?index=<i0,i1,...>`` -> ``TouchesPayload``
    Every recorded access to one element of tensor ``t`` (aliasing arguments included), in execution
    order: program, op, line, kind, the lane and the value (at most ``MAX_TOUCHES``).
``GET /api/launch/<i>/feeds/<t>?index=<i0,i1,...>`` -> ``FeedsPayload``
    The loads that fed one element of tensor ``t``: for each write that decides its final value, the load
    lines it depends on, which of their executions and the loaded elements (view indices, at most
    ``feeds.MAX_INDICES`` per load line), from the recorder's dataflow facts (view/feeds.py).
``GET /api/launch/<i>/findings`` -> ``FindingsPayload``
    The analysis findings of the launch (at most ``MAX_FINDINGS``), most severe first, each with the
    program, op (its seq in the program) and source line to jump to.
``GET /api/launch/<i>/charts`` -> ``ChartsPayload``
    ``HIST_BINS``-bin histograms of every grid metric over the programs, the launch's roofline point on
    the analysis' GPU, and bytes per tensor.
``GET /api/launch/<i>/precision`` -> ``PrecisionPayload`` (precisionview.py)
    Where a launch followed by a float64 shadow (``trace(shadow="float64")``, or served with ``--shadow
    float64``) loses precision, per line of the kernel's own file: the analysis' "precision" entry, one row a
    line (at most ``MAX_SOURCE_LINES``), its stores (at most ``precisionview.MAX_STORES``), the lines where
    precision is lost; without the shadow, ``note`` says how to get it.

Static routes: ``/`` the page, ``/static/<file>`` the frontend's files, ``/favicon.svg``,
``/vendor/plotly.min.js`` from the installed plotly package, and ``/vendor/plotly-guards.json`` ({"ids": [...]}: the element ids plotly.js
checks before injecting bundled styles, which the page's CSP forbids; see app.py).
"""
from __future__ import annotations

from typing import Any, Optional, TypedDict


class ErrorPayload(TypedDict):
    error: str
    status: int


class TracePayload(TypedDict):
    kinds: list           # op kind names; the "kind" columns below index into it
    launches: dict        # kernel, grid, programs, skipped, ops, findings, completed, error, worst (the worst
                          # finding's kind), efficiency (sector efficiency), bound ("memory" / "compute" on the
                          # report's GPU; None where unknown): parallel lists (the first MAX_LAUNCHES launches)
    total_launches: int
    analysis: dict        # {"available": bool, "error": str | None}
    metrics: dict         # the grid metrics, in display order: {"key": [...], "label": [...]}
    compare: dict         # {"available": bool, "launches": int}: a second trace served for the diff view
    limits: dict          # {"ops_per_page": MAX_OPS, "findings": MAX_FINDINGS}


class LaunchPayload(TypedDict):
    index: int
    programs_in_flight: Optional[int]    # programs the analysis' GPU runs at once (one wave), None without it
    kernel: str
    grid: list
    args: dict
    config: Any
    completed: bool
    error: Optional[str]
    values_truncated: bool
    recorded_programs: int
    skipped_programs: int
    tensors: dict         # name, dtype, shape, strides, storage_offset, storage_size, elem_bytes, load_bytes,
                          # store_bytes (+ atomic_bytes, unique_load_bytes, dram_read_bytes, dram_write_bytes
                          # with analysis): parallel lists
    files: list           # the "file" column of ProgramPayload.ops indexes into it
    source: dict          # file, first_line, lines, truncated,
                          # margin: {line, ops, bytes, sectors, sector_efficiency, findings} lists
    metrics: dict         # the analysis metrics of the launch ({} without analysis)
    checks_skipped: list  # sanitizer checks the analysis could not run, with the reason
    findings: int
    analysis_error: Optional[str]
    hints: list           # advice from the analysis (analysis/advice/hints.py): {kind, line, message, effect}


class GridPayload(TypedDict):
    grid: list
    z: int
    block: list           # [bx, by] programs per cell
    cols: int
    rows: int
    metrics: dict         # metric key -> list (row-major over rows x cols), None where unknown
    recorded: list        # 1 where the cell holds a recorded program
    ranges: dict          # metric key -> [min, max] over the launch


class ProgramPayload(TypedDict):
    program: list
    linear: int           # x + gx * (y + gy * z): the id TensorPayload's "program" column uses
    recorded: bool
    metrics: dict         # metric key -> value
    ops: dict             # seq, kind, tensor, file, line, shape, active, lanes, bytes, sectors,
                          # sector_efficiency, oob, values (1: values recorded), aux (dot: M, N, K),
                          # vmin, vmax, vmean (finite values of the active lanes; None without), nan, inf
                          # (counts; -1 where no values were recorded); a math row's from its float ops'
                          # results in this program (mathrows.py: every lane, no mean), and for every row
                          # results (1: those values; 2: left out by the recorder's cap; 0), born (1: a
                          # NaN/Inf that reached memory was born on the line), first ({op, lane, value}: the
                          # program's first non-finite result on the line, or None)
    total_ops: int
    offset: int           # this page: ops offset .. offset + limit - 1
    limit: int
    findings: list        # indices into the launch's FindingsPayload


class TensorPayload(TypedDict):
    launch: int
    tensor: int
    name: str
    dtype: str
    shape: list
    strides: list
    storage_offset: int
    storage_size: int
    plane: dict           # see tensormap.Plane.to_dict: dims, index, wrap, window origin and size, cell size
    selection: dict       # {"mode", "program", "op"}
    elements: int         # distinct elements touched by the selection, in the whole tensor
    elements_hidden: int  # of those, not drawn: in another slice or outside the window
    oob_lanes: int        # active lanes outside the tensor's storage
    oob_examples: list
    halo: dict            # out-of-bounds lanes at their would-be cells (evidence.halo): row, col (cells relative
                          # to the window, possibly negative or past cell_rows / cell_cols), offset, hidden
    cells: dict           # cell (row-major index), kinds (1 read | 2 written), lanes, program (the smallest
                          # linear id that touched it), programs (how many), value and writer (the linear id
                          # of the last program that wrote it, -1: none), element by element, or fill
                          # (downsampled: share of the cell touched)
    dropped: list


class PlanesPayload(TypedDict):
    launch: int
    tensor: int
    name: str
    dtype: str
    shape: list
    strides: list
    storage_offset: int
    storage_size: int
    selection: dict
    dim: int              # the dim the panels step along
    first: int            # the first panel's index along it
    total: int            # planes along it (panels past the first MAX_PANELS are stepped to with first=)
    panels: list          # per panel: index (along dim), plane, cells and halo, as TensorPayload's
    elements: int
    elements_hidden: int  # touched elements on no drawn panel (another slice, or a panel not drawn)
    oob_lanes: int
    oob_examples: list
    dropped: list         # columns left out of every panel's cells, as TensorPayload's


class StoragePayload(TypedDict):
    launch: int
    tensor: int
    name: str
    dtype: str
    shape: list
    strides: list
    storage_offset: int
    storage_size: int     # elements of the tensor's dtype in its storage
    elem_bytes: int
    aliases: list         # other arguments over the same storage, whose accesses are drawn too
    layout: dict          # elements (logical), covered (distinct storage elements they cover, None: unknown),
                          # span ([lowest, highest] offset, None for an empty view), padding and padding_bytes
                          # (storage elements no logical element covers), before, gaps, after (where that
                          # padding is), expanded (dims of stride 0), order (dims by stride, outermost first),
                          # contiguous, overlapping (elements share storage other than through an expanded dim)
    plane: dict           # the storage as a wrapped 1-D plane (tensormap.Plane.to_dict): wrap, window, cell size
    selection: dict
    elements: int
    elements_hidden: int
    oob_lanes: int
    oob_examples: list
    halo: dict            # out-of-bounds lanes at their would-be cells past the storage's ends (evidence.halo)
    cover: dict           # {known, sampled, runs: [[first cell, cells, fill]]}: the cells logical elements cover
    cells: list           # runs [first cell, cells, kinds (1 read | 2 written), fill] of the cells the selection
                          # touched (fill: the share of a downsampled cell's elements; 1 element by element)
    values: Optional[dict]  # the recorded values on the cells (cellvalues.py): exact, block ([rows, cols] of cells a
                          # value covers: [1, 1] up to MAX_VALUE_CELLS touched cells), cols, runs, value; None: none
    dropped: list         # "cover", then "values", then "cells", where a scattered layout would pass MAX_TENSOR_BYTES


class TilesPayload(TypedDict):
    launch: int
    program: list
    by: str               # "trip" (the loop's trips, inferred) or "op" (one memory op a step)
    steps: int
    step: Optional[int]   # the step drawn; None: every step
    trips: int            # trips inferred (0: no line repeats)
    ops: dict             # seq, kind, tensor, line, trip (-1: outside the loop) of the step's memory ops
    total_ops: int
    outside: int          # memory ops outside the loop (drawn as context in every trip)
    tensors: list         # per tensor: tensor, name, dtype, shape, strides, plane, cells (runs [first cell,
                          # cells, kinds, fill] as StoragePayload's), context (runs [first cell, cells] the program
                          # touched in other steps), box ([r0, r1, c0, c1] of the step's elements on the plane,
                          # inclusive; None: none), first / last (a wrapped 1-D tensor's first and last element
                          # index), values (the step's recorded values, as StoragePayload's), elements,
                          # elements_hidden, ops, oob_lanes, halo
    tensors_total: int
    dropped: list         # "context", "values", then tensor names, where many scattered tiles would pass MAX_TENSOR_BYTES


class TouchesPayload(TypedDict):
    tensor: int
    name: str
    index: list           # the element's view index
    offset: int           # its storage offset
    touches: dict         # order, program ([x, y, z]), seq, kind, tensor (the argument used), line, lane,
                          # value: every access to the element in execution order (model.touches)
    total: int
    truncated: bool       # more than MAX_TOUCHES: the first ones are listed


class FeedsPayload(TypedDict):
    tensor: int
    name: str
    index: list           # the element's view index
    offset: int           # its storage offset
    recorded: bool        # the launch has dataflow facts (a trace recorded before them has none)
    writes: list          # the writes that decide the final value (the last store and the atomics after it, at
                          # most feeds.MAX_WRITES): {program, seq, kind, line, tensor, lane}
    writes_total: int
    feeds: list           # per (write, load line, role, how): write (its position in ``writes``), tensor (index or
                          # None), name, file, line, op (load or an atomic), role ("value": what is stored
                          # depends on it; "address": the pointers or the mask do), how ("traced", or "untraced":
                          # every execution and lane of the line before the write), trips (executions picked),
                          # of (executions of the line before the write in that program), maps (lane maps: per
                          # loaded dim, the written dim whose index it shares, -1 every index), elements (fed
                          # elements), indices (their view indices, the first MAX_INDICES), truncated, outside
                          # (fed offsets that are no element of the view), ranges (per dim {runs: [[lo, hi]],
                          # count}), box (the elements are every combination of the ranges)


class FindingsPayload(TypedDict):
    kind: list
    severity: list
    message: list
    program: list         # [x, y, z] or None
    op: list              # seq within the program, or None
    line: list
    tensor: list
    count: list
    evidence: list        # per finding: programs (the programs involved, [x, y, z] each: a race names two),
                          # tensor_index (the tensor's position in the launch, or None), offsets (the first
                          # offending storage offsets), indices (their view indices, None outside the view),
                          # outside (offset outside the storage), valid_range, other_line (a race's other access),
                          # grid: every program involved, as the grid marks it (evidence.grid_marks): {count,
                          # runs, ranges: [[first, last]] (linear ids, x fastest, inclusive; at most
                          # evidence.MARK_RUNS runs), exact (the ranges hold them all), writers, readers (a race's
                          # two sides, the same keys; None for other kinds)}; a release_without_barrier finding
                          # also has stores: the block stores its atomic follows with no barrier between
                          # (evidence.release_stores): [{tensor_index, name, line, elements, seq (that store in
                          # the finding's program), indices (view indices to outline), partial}]
    extent: list          # per finding: its full extent, the report's "extent" (analysis/report.py's schema)
    kinds: list           # every finding kind: {"kind", "severity", "meaning"} (analysis/findings.py's KINDS)
    total: int
    truncated: bool
    suppressed: int       # findings the analysis left out over its cap (whole trace)


class ChartsPayload(TypedDict):
    histograms: dict      # metric -> {"edges": [...], "counts": [...]}
    roofline: dict        # flops, dram_bytes_predicted, arithmetic_intensity, machine, peak_flops,
                          # peak_bandwidth, bound, time_s
    tensors: dict         # name, load_bytes, store_bytes (+ dram_read_bytes, dram_write_bytes)


class ComparePayload(TypedDict):
    launch: int
    kernel: str           # the compared launch's kernel
    metrics: dict         # {"key", "here", "there"}: the launch metrics that differ, parallel lists
    only_here: list       # findings of this trace the compared one lacks: {kind, tensor, program, line, message}
    only_there: list      # findings of the compared trace this one lacks (the fix removed them, or made them)
    error: Optional[str]  # why a side has no analysis


class DiffPayload(TypedDict):
    tensor: int
    name: str
    compared: int         # elements written on both sides
    differing: int
    only_a: int           # written only in this trace
    only_b: int           # written only in the compared one
    values_recorded: bool
    elements: dict        # index (view index or None), offset, a, b (values; None: not written there),
                          # a_program, b_program ([x, y, z] or None), a_line, b_line
    truncated: bool


class PrecisionPayload(TypedDict):
    available: bool       # the launch has shadow data (the analysis' "precision" entry)
    note: Optional[str]   # without it: why, and how to get it
    mode: Optional[str]   # "float64"
    source: Optional[str]  # "recorded" (traced with the shadow) or "rerun" (run again by the served analysis)
    reproduced: Optional[bool]  # a rerun wrote exactly the bytes the trace kept (None: nothing to compare)
    file: Optional[str]   # the kernel's file, whose lines these are
    lines: dict           # parallel lists, by line: line, ops, type, error_max, error_mean, local_max (the type
                          # furthest from float64), gained_max, amplified_max, amplified_mean (the largest over
                          # the line's types), explains (share of all stored error), shares ([{tensor,
                          # store_line, share}], the largest MAX_SHARES)
    stores: dict          # parallel lists: line, tensor, type, error_max, error_mean, normwise, lost_at (a line
                          # of this file or None)
    lost: list            # {line, tensor, store_line, amplified_mean, gained_max}: a precision_loss hint's
                          # line where precision is lost, one per hinted store
    other_files: int      # lines with shadow data in other files (helpers), not in this column
    truncated: bool
