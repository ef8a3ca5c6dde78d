"""A race whose extent is wider than the two programs a finding names first, for the UI's extent tests
(tests/view/test_browser_findings.py, tests/view/test_web_api.py).

``shared_row`` runs on a grid of ``GRID`` programs: every even program stores one row ``out[0:n]`` (8
writers, no atomic), programs 1 and 5 load that row (2 readers), the other odd programs write rows of
their own (no conflict). The expected sets are computed here from the kernel's own branch conditions, never
from the tool.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

GRID = 16
N = 102                 # elements of the shared row
BLOCK = 128
READERS = (1, 5)


@triton.jit
def shared_row(out, scratch, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    if pid % 2 == 0:
        tl.store(out + offs, offs.to(tl.float32) + pid, mask=m)      # every even program: the same row
    elif (pid == 1) | (pid == 5):
        v = tl.load(out + offs, mask=m)                               # readers of that row
        tl.store(scratch + pid * BLOCK + offs, v, mask=m)
    else:
        tl.store(scratch + pid * BLOCK + offs, offs.to(tl.float32), mask=m)


def writers() -> list:
    """The programs that store the shared row: the even ones."""
    return [p for p in range(GRID) if p % 2 == 0]


def readers() -> list:
    return list(READERS)


def run(kernel) -> None:
    """Launch ``kernel`` (``shared_row`` wrapped by ``triton_trace.trace``) once."""
    out, scratch = torch.zeros(N), torch.zeros(GRID * BLOCK)
    kernel[(GRID,)](out, scratch, N, BLOCK=BLOCK)
