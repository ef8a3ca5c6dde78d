"""Requests and sectors of a software-pipelined fp32 matmul whose copies are 4-byte ``cp.async.ca``: the
examples' grouped matmul (``tl.dot(..., input_precision="ieee")``, masks on M, N and on the K remainder)
with 64x64x32 tiles and 4 warps, on matrices whose pitch is a multiple of 8 elements but not of 16 (Triton
then cannot prove any row 16-byte aligned: every copy moves one element). The GPU case this mirrors is
``matmul_1000_64x64x32_fp32_w4`` of benchmarks/fidelity (measured on an H100 with ncu: 1,024,000 requests
and 4,000,000 sectors in ``l1tex__t_{requests,sectors}_pipe_lsu_mem_global_op_ld``, which counts LDGSTS).

The count by hand, from the compiled layouts checked first (the test asserts them):

- A, a 64x32 tile in ``blocked<sizePerThread [1, 1], threadsPerWarp [1, 32], warpsPerCTA [4, 1]>``: one warp
  instruction copies 32 consecutive k of one row (128 bytes), 16 instructions per thread cover the tile. It
  is a request when one of its lanes is in bounds: every row below M on every K step (the last step has
  K - 3 * 32 = 8 live k). M = 72, N = K = 104: rows 64 + 8 = 72 per tile column, 2 tile columns, 4 K steps:
  72 * 2 * 4 = 576 requests. Rows start 104 * 4 = 416 bytes apart, 13 sectors, so each is 32-byte aligned:
  a full step is 4 sectors, the last one 8 * 4 bytes = 1 sector, 13 a row: 72 * 2 * 13 = 1872 sectors.
- B, a 32x64 tile in ``threadsPerWarp [1, 32], warpsPerCTA [2, 2]``: one instruction copies 32 consecutive n
  of one k row; a k row of the tile is two instructions, both live in either tile column (the second column
  holds n = 64..103: 32 and 8 live lanes). k rows per program: 32 * 3 + 8 = 104, 4 programs: 104 * 2 * 4 =
  832 requests. Sectors per k row: 64 * 4 bytes = 8 in the first tile column, 40 * 4 = 160 bytes = 5 in the
  second, over 2 tile rows: 104 * (8 + 5) * 2 = 2704.
- C, the 64x64 store in B's layout: one instruction per 32 columns of a row, written once per element: rows
  64 + 8, two instructions each in both tile columns: 72 * 2 * 2 = 288 requests; a row of C is 416 bytes,
  13 aligned sectors: 72 * 13 = 936 sectors.
"""
from __future__ import annotations

import inspect
import re

import pytest
import torch

import kernels as K
import triton_trace

M, N, KD = 72, 104, 104
TILES = dict(block_m=64, block_n=64, block_k=32, group_m=8)
WARPS = 4
A_LINE, B_LINE, C_LINE = "a = tl.load(a_ptrs", "b = tl.load(b_ptrs", "tl.store(c_ptrs"
EXPECTED = {A_LINE: (576, 1872), B_LINE: (832, 2704), C_LINE: (288, 936)}   # (requests, sectors), by hand above
LAYOUTS = {A_LINE: ([1, 1], [1, 32], [4, 1]), B_LINE: ([1, 1], [1, 32], [2, 2]), C_LINE: ([1, 1], [1, 32], [2, 2])}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


@pytest.fixture(scope="module")
def trace():
    torch.manual_seed(0)
    kernel = triton_trace.trace(K.make_matmul(), values=False)
    triton_trace.reset()
    K.matmul(torch.randn(M, KD), torch.randn(KD, N), kernel=kernel, **TILES)
    return triton_trace.current_trace()


def _line_of(text: str) -> int:
    src, first = inspect.getsourcelines(K.matmul_kernel)
    return next(first + i for i, line in enumerate(src) if text in line)


@pytest.mark.parametrize("gpu", ["H200", "A100"])
def test_compiled_copies_are_one_element_cp_async_ca(trace, gpu):
    """What the hand count rests on: the compiled kernel copies A and B with 4-byte ``cp.async.ca`` (PTX) in
    the layouts above (TTGIR), through a pipelined loop."""
    compiled = trace.launches[0].compiled(target=gpu)      # launched with 4 warps
    copies = re.findall(r"cp\.async\.(c[ag])\.shared\.global \[[^\]]*\], \[[^\]]*\], (0x[0-9a-f]+|\d+)",
                        compiled.ir["ptx"])
    assert copies and {c for c, _ in copies} == {"ca"} and {int(n, 0) for _, n in copies} == {4}
    for text, (spt, tpw, wpc) in LAYOUTS.items():
        ops = compiled.ops_at(_line_of(text))
        assert ops, text
        for o in ops:
            lay = o["layout"]
            assert (lay["sizePerThread"], lay["threadsPerWarp"], lay["warpsPerCTA"], lay["order"]) == (spt, tpw, wpc, [1, 0])
            assert o["vector_bytes"] == 4
            assert o["instruction"] == ("st" if text == C_LINE else "cp.async")


@pytest.mark.parametrize("gpu", ["H200", "A100"])
def test_requests_and_sectors_are_the_hand_count(trace, gpu):
    launch = triton_trace.analyze(trace, gpu=gpu, num_warps=WARPS, what_if=False).to_dict()["launches"][0]
    assert launch["compiled"]["layouts"] == "compiler", launch["compiled"]
    got = {}
    for op in launch["ops"]:
        if op["kind"] not in ("load", "store"):
            continue
        text = next(t for t in EXPECTED if _line_of(t) == op["line"])
        got[text] = (op["requests"], op["sectors"])
        assert op["compiled_as"].startswith("cp.async 4 B" if op["kind"] == "load" else "st 4 B"), op["compiled_as"]
    assert got == EXPECTED
    m = launch["metrics"]
    assert (m["load_requests"], m["load_sectors"]) == (576 + 832, 1872 + 2704)
    assert (m["store_requests"], m["store_sectors"]) == (288, 936)
