"""Launches compiled for GPU targets in tests/compiled/test_compiled.py, and the writer of their committed fixtures.

    PYTHONPATH=. python tests/helpers/compiled_cases.py      # rewrites tests/fixtures/compiled/*.json

A fixture holds what Triton's compiler printed for each global memory op of a launch, cut from its raw
TTGIR and PTX with plain text searches (not with triton_trace.compiled's parser): the op's TTGIR line, the
layout definition line it names, the PTX global-memory instructions of its source line, and that source
line's text. The test parses those texts its own way and compares with what triton_trace reports.
"""
from __future__ import annotations

import json
import os
import re
import sys

import torch
import triton

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:          # run as a script
    sys.path.insert(0, _TESTS)
import kernels as K  # noqa: E402
from helpers.paths import FIXTURES as _FIXTURES  # noqa: E402

FIXTURES = os.path.join(_FIXTURES, "compiled")
TARGETS = ("sm_80", "sm_90", "sm_100")


def _one(run):
    import triton_trace
    triton_trace.reset()
    run()
    return triton_trace.current_trace().launches[-1]


def _add():
    x, y = torch.randn(100_000), torch.randn(100_000)
    K.add(x, y, kernel=_traced(K.make_add()), block=1024)


def _matmul(dtype, warps):
    def run():
        a, b = torch.randn(256, 64).to(dtype), torch.randn(64, 256).to(dtype)
        c = torch.empty(256, 256)
        _traced(K.make_matmul())[(4,)](a, b, c, 256, 256, 64, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
                                       num_warps=warps, num_stages=3)
    return run


def _softmax_unaligned():
    K.softmax(torch.randn(8, 1100)[:, :1000], kernel=_traced(K.make_softmax()))


def _transpose():
    K.transpose(torch.randn(64, 96).t(), kernel=_traced(K.make_transpose()), block_m=32, block_n=32)


def _traced(k):
    import triton_trace
    return triton_trace.trace(k, values=False)


CASES = {
    "add_1024": _add,
    "matmul_128x128x32_fp32_4warps": _matmul(torch.float32, 4),
    "matmul_128x128x32_fp16_8warps": _matmul(torch.float16, 8),
    "softmax_unaligned_rows": _softmax_unaligned,
    "transpose_32x32": _transpose,
}


def launch(case: str):
    return _one(CASES[case])


_MEM = ("tt.load ", "tt.store ", "ttg.async_copy_global_to_local ", "tt.atomic_rmw ", "tt.descriptor_load ")


def raw_fixture(launch, target: str) -> dict:
    """The compiler's own text for each memory op of ``launch`` compiled for ``target``."""
    c = launch.compiled(target=target, cache=False)
    ttgir, ptx = c.ir["ttgir"].splitlines(), c.ir["ptx"].splitlines()
    layouts = {ln.split(" = ")[0]: ln for ln in ttgir if ln.startswith("#") and " = #ttg." in ln}
    source = open(launch.source_file).read().splitlines()
    ops = []
    for n, text in enumerate(ttgir, start=1):
        if not any(m in text for m in _MEM) or text.lstrip().startswith("#"):
            continue
        loc = c.lines["ttgir"][n - 1]
        names = re.findall(r"#(blocked\d*|linear\d*|mma\d*|slice\S*)", text.split(" : ")[-1])
        ptx_instr = sorted({p.strip() for p, l in zip(ptx, c.lines["ptx"]) if l == loc and
                            re.search(r"\b(ld|st|atom|red)\.global|cp\.async", p)})
        ops.append({"ttgir": text.strip(), "layout_line": layouts.get("#" + names[-1]) if names else None,
                    "source_line": source[loc[1] - 1].strip() if loc else None, "ptx": ptx_instr})
    return {"triton": triton.__version__, "target": target, "num_warps": c.num_warps, "ops": ops}


def write() -> None:
    os.makedirs(FIXTURES, exist_ok=True)
    major = ".".join(triton.__version__.split(".")[:2])
    for case in CASES:
        lc = launch(case)
        for target in TARGETS:
            path = os.path.join(FIXTURES, f"{case}.{target}.triton{major}.json")
            with open(path, "w") as f:
                json.dump(raw_fixture(lc, target), f, indent=1)
            print(path)


if __name__ == "__main__":
    write()
