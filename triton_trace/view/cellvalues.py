"""The recorded values on a storage or tile plane (storageview.py, tilesview.py), for their hover text and their
"by value" colouring: the tensor view sends a value per cell beside its other columns, these views draw
their cells as runs and get the values as a list of their own.

Bounded: a plane whose touched cells number at most MAX_VALUE_CELLS sends one value per cell (the element's
last recorded value when a cell is one element, ``exact``); past it the cells are grouped into blocks of
``block = [rows, cols]`` cells, doubled along the longer side until the blocks fit, and each block sends the
mean of its finite values. A block or cell with a NaN is "nan", else with an infinity "inf" / "-inf" (NaN
and infinities are what a user looks for; a mean would hide them).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .limits import MAX_VALUE_CELLS
from .payload import json_values
from .tensormap import Plane, cells
from .tensorview import Elements, runs


def cell_values(plane: Plane, table: Elements, pos: np.ndarray, entry: np.ndarray,
                limit: int = MAX_VALUE_CELLS) -> Optional[dict]:
    """``{exact, block, cols, runs, value}``: ``value`` lists the value of each cell of the value grid (the
    plane's cells grouped ``block`` at a time, ``cols`` blocks a row) along ``runs`` ([first, count] of
    consecutive grid cells, sorted); None when no placed element recorded a value."""
    entry = np.asarray(entry, np.int64)
    has = table.has_value[entry]
    if not has.any():
        return None
    r, c = np.divmod(cells(plane, np.asarray(pos, np.int64)[has]), max(plane.cell_cols, 1))
    v = table.value[entry[has]].astype(np.float64)
    br = bc = 1
    while True:
        cols = -(-plane.cell_cols // bc)
        uniq, inv = np.unique((r // br) * cols + c // bc, return_inverse=True)
        if len(uniq) <= limit:
            break
        if (br <= bc and br < plane.cell_rows) or bc >= plane.cell_cols:
            br *= 2
        else:
            bc *= 2
    n = len(uniq)
    inv = inv.reshape(-1)
    finite = np.isfinite(v)
    count = np.bincount(inv, weights=finite, minlength=n)
    mean = np.bincount(inv, weights=np.where(finite, v, 0.0), minlength=n) / np.maximum(count, 1)
    any_of = lambda m: np.bincount(inv, weights=m, minlength=n) > 0
    out = np.where(count > 0, mean, np.nan)
    out = np.where(any_of(v == -np.inf), -np.inf, out)
    out = np.where(any_of(v == np.inf), np.inf, out)
    out = np.where(any_of(np.isnan(v)), np.nan, out)
    return {"exact": bool(br == bc == 1 and plane.fr == plane.fc == 1), "block": [int(br), int(bc)], "cols": int(cols),
            "runs": runs(uniq), "value": json_values(out, 6)}
