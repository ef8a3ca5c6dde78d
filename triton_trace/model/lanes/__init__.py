"""Compact lane storage: the element offsets and masks of every recorded memory op.

Most Triton accesses are regular: a row (one op of one program) is a block whose offsets are
``base + sum_d index_d * stride_d`` and whose mask is all true or a prefix. Raw int64 offsets plus a bool
mask cost 9 bytes a lane; stored as a base per row and strides shared by a run of rows they cost almost
nothing, and only irregular rows pay per lane.

Layout. Rows are grouped into *segments*: runs of consecutive rows that share a *signature* (offset
encoding, mask encoding, lanes per row, block shape, and for the shared-stride encoding the strides).
Signatures are few and stored once. Per-row and per-lane data live in flat pools, in row order; where a
segment's data starts in each pool follows from the segment table (a running sum), so it is not stored.

Offset encodings (``sig_offs``):
  AFFINE      base per row; strides of the signature
  ROWSTRIDES  base per row; strides per row (``row_strides``, ndim per row)
  DELTA32     base per row; an int32 delta per lane (``delta32``)
  RAW         an int64 offset per lane (``raw``); the row's base is its first offset and unused
Mask encodings (``sig_mask``):
  FULL        every lane active
  ROWS        a code per row (``code``): ``c >= 0`` means the first ``c`` lanes are active; ``c < 0`` means
              the row is the ``-c``-th bit-packed row of its segment (``bits``, ``ceil(n / 8)`` bytes a row)

Offsets are stored modulo 2**64 (numpy's int64 wrap-around): decoding gives back the recorded values.
"""
from .encoding import (AFFINE, ARRAYS, DELTA32, FULL, MAX_RANK, RAW, ROWS, ROWSTRIDES)  # noqa: F401
from .reader import Lanes  # noqa: F401
from .writer import LaneWriter, lanes_from_flat  # noqa: F401

__all__ = ["AFFINE", "ARRAYS", "DELTA32", "FULL", "MAX_RANK", "RAW", "ROWS", "ROWSTRIDES", "Lanes", "LaneWriter",
           "lanes_from_flat"]
