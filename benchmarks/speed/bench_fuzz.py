"""How long triton_trace.fuzz takes for 100 shapes of a softmax (rows up to 1024, row lengths up to 1024,
contiguous and padded-row layouts; the kernel assumes unit column stride, and a transposed layout
fails at once: the fuzzer finds that in a second), every launch traced and analysed and compared with torch.

    python benchmarks/speed/bench_fuzz.py [--examples 100]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))        # the test kernels

import triton_trace  # noqa: E402
from kernels import tutorials as T  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=100)
    args = ap.parse_args(argv)
    kernel = T.make_softmax()
    sizes = []

    def run(case):
        x = case.make((case["rows"], case["cols"]))
        sizes.append(x.numel())
        return T.softmax(x, kernel=kernel)

    def reference(case):
        return torch.softmax(case.make((case["rows"], case["cols"])), dim=1)

    t0 = time.perf_counter()
    result = triton_trace.fuzz(run, reference, dims={"rows": (1, 1024), "cols": (1, 1024)}, blocks=(128, 1024),
                               layouts=("contiguous", "sliced"), max_examples=args.examples,
                               database=None)
    wall = time.perf_counter() - t0
    print(f"softmax fuzz: {result['examples']} shapes, {wall:.1f} s ({wall / result['examples'] * 1000:.0f} ms per "
          f"shape), largest {max(sizes)} elements, median {sorted(sizes)[len(sizes) // 2]}; no failure")


if __name__ == "__main__":
    main()
