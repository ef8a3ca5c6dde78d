"""The recorded values of a launch, back to back in one byte buffer."""
from __future__ import annotations

import numpy as np


class ValueBlob:
    """The recorded values, one growing byte buffer: each block is written once, straight from the
    (broadcast) values, right after the previous one (as a concatenation would place it). Sized for the value cap up front (pages are
    only touched when written), so a launch within the cap never copies what it recorded."""

    def __init__(self, cap_elems: int):
        self.buf = np.empty(min(max(int(cap_elems), 0), 1 << 27) * 8, dtype=np.uint8)
        self.used = 0
        self.touched = 0       # bytes written at some point (a rolled back chunk's stay resident)

    def append(self, v: np.ndarray) -> int:
        start = self.used
        end = start + v.size * v.dtype.itemsize
        if end > len(self.buf):
            grown = np.empty(max(end, 2 * len(self.buf)), dtype=np.uint8)
            grown[:self.used] = self.buf[:self.used]
            self.buf, self.touched = grown, self.used
        np.copyto(self.buf[start:end].view(v.dtype).reshape(v.shape), v)
        self.used = end
        self.touched = max(self.touched, end)
        return start

    def array(self) -> np.ndarray:
        # Pages never written take no memory, so the buffer's unused tail costs nothing; copy only when
        # most of what was written (and stays resident) was rolled back
        out = self.buf[:self.used]
        return out if 2 * self.used >= self.touched else out.copy()
