"""Record, on the GPU, the approximate PTX instructions Triton emits for fp32 math, for ``numerics="compiled"``.

    PYTHONPATH=. python3 benchmarks/fidelity/record_intrinsics.py --out OUT [--tables]

Triton 3.6 compiles fp32 ``x / y`` and ``tl.fdiv`` to ``div.full.f32``, ``tl.exp``/``tl.exp2`` to
``ex2.approx.f32`` (after a multiply by log2(e)), ``tl.sqrt`` to ``sqrt.approx.ftz.f32`` and ``tl.rsqrt`` to
``rsqrt.approx.ftz.f32`` (read from its PTX for sm_90); the interpreter computes all of them correctly
rounded in numpy. This runs each instruction through ``tl.inline_asm_elementwise`` over every fp32 bit
pattern (one-input instructions; 2^32 inputs in chunks) or 2^26 random pairs (div.full), and writes, per
instruction: how far the GPU's result is from the correctly rounded one (an ulp histogram, computed on
the GPU in float64), and a fixed sample of (input, output) bit pairs that emulations are tested against
(OUT/intrinsics.npz; the sample inputs are a deterministic function of the seed, so a test can rebuild
them). Prints the histograms.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

INSTRUCTIONS = {      # name -> (PTX, number of inputs, float64 reference on torch tensors)
    "ex2.approx.f32": ("ex2.approx.f32 $0, $1;", 1, lambda x: torch.exp2(x)),
    "ex2.approx.ftz.f32": ("ex2.approx.ftz.f32 $0, $1;", 1, lambda x: torch.exp2(x)),
    "sqrt.approx.ftz.f32": ("sqrt.approx.ftz.f32 $0, $1;", 1, lambda x: torch.sqrt(x)),
    "rsqrt.approx.ftz.f32": ("rsqrt.approx.ftz.f32 $0, $1;", 1, lambda x: torch.rsqrt(x)),
    "div.full.f32": ("div.full.f32 $0, $1, $2;", 2, lambda x, y: x / y),
}
SAMPLE = 1 << 16
torch = None
DEVICE = "cuda"
# ``--tables``: every input of one binade (or two) of the one-input MUFU instructions, for an emulation to be
# built from (the hardware's table does not depend on the exponent, if the emulation is right):
# name -> (PTX, first input, number of consecutive fp32 inputs, float64 reference)
TABLES = {
    "rcp.approx.ftz.f32": ("rcp.approx.ftz.f32 $0, $1;", 1.0, 1 << 23, lambda x: 1.0 / x),
    "rcp.approx.ftz.f32 [2, 4)": ("rcp.approx.ftz.f32 $0, $1;", 2.0, 1 << 23, lambda x: 1.0 / x),
    "sqrt.approx.ftz.f32": ("sqrt.approx.ftz.f32 $0, $1;", 1.0, 1 << 24, lambda x: torch.sqrt(x)),
    "rsqrt.approx.ftz.f32": ("rsqrt.approx.ftz.f32 $0, $1;", 1.0, 1 << 24, lambda x: torch.rsqrt(x)),
    "ex2.approx.ftz.f32 [0.5, 1)": ("ex2.approx.ftz.f32 $0, $1;", 0.5, 1 << 23, lambda x: torch.exp2(x)),
    "ex2.approx.ftz.f32 [1, 2)": ("ex2.approx.ftz.f32 $0, $1;", 1.0, 1 << 23, lambda x: torch.exp2(x)),
    "ex2.approx.ftz.f32 [-1, -0.5)": ("ex2.approx.ftz.f32 $0, $1;", -0.5, 1 << 23, lambda x: torch.exp2(x)),
}


def record_tables(out: str) -> dict:
    """For each TABLES entry: the GPU's result for each input, as its signed distance in ulps (int8; the
    value order of bit patterns) from the float64 result rounded to fp32. Writes OUT/tables.npz."""
    one, _ = _kernels()
    arrays, summary = {}, {}
    for name, (asm, first, n, ref) in TABLES.items():
        start = int(np.float32(first).view(np.int32))
        step = -1 if first < 0 else 1              # negative values: magnitudes grow with the bit pattern
        bits = torch.arange(start, start + n, device=DEVICE, dtype=torch.int64).to(torch.int32)
        x = bits.view(torch.float32)
        o = torch.empty_like(x)
        one[(triton_cdiv(n, 1024),)](x, o, n, ASM=asm, BLOCK=1024)
        r = ref(x.double()).to(torch.float32)
        key = lambda v: torch.where(v < 0, -(v.to(torch.int64) & 0x7FFFFFFF), v.to(torch.int64))
        d = key(o.view(torch.int32)) - key(r.view(torch.int32))
        arrays[name] = d.clamp(-127, 127).to(torch.int8).cpu().numpy()
        vals, counts = torch.unique(d, return_counts=True)
        summary[name] = {"first": first, "n": n, "step": step, "beyond_127": int((d.abs() > 127).sum()),
                         "ulps": {str(int(v)): int(c) for v, c in zip(vals.tolist()[:16], counts.tolist()[:16])}}
        print(f"{name:32s} " + ", ".join(f"{k}: {v}" for k, v in summary[name]["ulps"].items()), flush=True)
    os.makedirs(out, exist_ok=True)
    np.savez_compressed(os.path.join(out, "tables.npz"), **{k.replace(" ", "_"): v for k, v in arrays.items()})
    with open(os.path.join(out, "tables.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "tables": summary}, f, indent=1, sort_keys=True)
    return summary


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def one(x_ptr, o_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        r = tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(o_ptr + offs, r, mask=m)

    @triton.jit
    def two(x_ptr, y_ptr, o_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        y = tl.load(y_ptr + offs, mask=m)
        r = tl.inline_asm_elementwise(ASM, "=f,f,f", [x, y], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(o_ptr + offs, r, mask=m)

    return one, two


def _ulp_hist(out, ref64, hist):
    """Add to ``hist`` (ulp distance -> count; -1: NaN on one side only) GPU results against the float64
    reference rounded to fp32; both-NaN and both-equal count as 0."""
    ref = ref64.to(torch.float32)
    ob, rb = out.view(torch.int32).to(torch.int64), ref.view(torch.int32).to(torch.int64)
    ko = torch.where(ob < 0, -(ob & 0x7FFFFFFF), ob)          # the value order of the bit patterns
    kr = torch.where(rb < 0, -(rb & 0x7FFFFFFF), rb)
    d = (ko - kr).abs()
    no, nr = torch.isnan(out), torch.isnan(ref)
    d = torch.where(no & nr, torch.zeros_like(d), d)
    d = torch.where(no ^ nr, torch.full_like(d, -1), d)
    d = d.clamp(max=1 << 20)
    vals, counts = torch.unique(d, return_counts=True)
    for v, c in zip(vals.tolist(), counts.tolist()):
        hist[int(v)] = hist.get(int(v), 0) + int(c)


def sample_inputs(n_inputs: int, seed: int = 0) -> np.ndarray:
    """The recorded sample's inputs as fp32 bit patterns, shape (SAMPLE, n_inputs): half uniform over all
    bit patterns, half over the values kernels meet (normal, scaled by 10^[-3, 3])."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, size=(SAMPLE // 2, n_inputs), dtype=np.uint64).astype(np.uint32)
    vals = (rng.standard_normal((SAMPLE // 2, n_inputs)) * 10.0 ** rng.uniform(-3, 3, (SAMPLE // 2, n_inputs)))
    return np.concatenate([bits, vals.astype(np.float32).view(np.uint32)])


def main(argv=None) -> int:
    global torch
    import torch as _torch
    torch = _torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunk-log2", type=int, default=27)
    ap.add_argument("--pairs-log2", type=int, default=26)
    ap.add_argument("--tables", action="store_true", help="only the per-binade tables (OUT/tables.npz)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("record_intrinsics.py: needs a CUDA GPU")
        return 2
    if args.tables:
        record_tables(args.out)
        return 0
    one, two = _kernels()
    block, dev = 1024, "cuda"
    results, arrays = {}, {}
    t0 = time.time()
    for name, (asm, nin, ref) in INSTRUCTIONS.items():
        hist: dict = {}
        run = (lambda xs, o: one[(triton_cdiv(o.numel(), block),)](xs[0], o, o.numel(), ASM=asm, BLOCK=block)) \
            if nin == 1 else \
            (lambda xs, o: two[(triton_cdiv(o.numel(), block),)](xs[0], xs[1], o, o.numel(), ASM=asm, BLOCK=block))
        if nin == 1:        # every fp32 bit pattern
            chunk = 1 << args.chunk_log2
            for start in range(0, 1 << 32, chunk):
                x = (torch.arange(start, start + chunk, device=dev, dtype=torch.int64) - (1 << 31)).to(torch.int32).view(torch.float32)
                o = torch.empty_like(x)
                run([x], o)
                _ulp_hist(o, ref(x.double()), hist)
            covered = "all 2^32 inputs"
        else:
            g = torch.Generator(device=dev).manual_seed(1)
            n = 1 << args.pairs_log2
            xs = [torch.randint(-(1 << 31), 1 << 31, (n,), device=dev, dtype=torch.int64, generator=g).to(torch.int32).view(torch.float32)
                  for _ in range(nin)]
            o = torch.empty_like(xs[0])
            run(xs, o)
            _ulp_hist(o, ref(*[x.double() for x in xs]), hist)
            covered = f"2^{args.pairs_log2} random bit-pattern pairs"
        inp = torch.from_numpy(sample_inputs(nin).astype(np.int64)).to(dev).to(torch.int32).view(torch.float32)
        o = torch.empty(SAMPLE, device=dev, dtype=torch.float32)
        run([inp[:, i].contiguous() for i in range(nin)], o)
        arrays[name.replace(".", "_")] = o.view(torch.int32).cpu().numpy().view(np.uint32)
        total = sum(hist.values())
        results[name] = {"ptx": asm, "covered": covered, "ulp_histogram": {str(k): v for k, v in sorted(hist.items())},
                         "exact_fraction": hist.get(0, 0) / total}
        print(f"{name:22s} {covered}: " + ", ".join(f"{k} ulp: {v}" for k, v in sorted(hist.items())[:8]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    np.savez_compressed(os.path.join(args.out, "intrinsics.npz"), **arrays)
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "sample": SAMPLE,
            "seconds": round(time.time() - t0, 1), "instructions": results}
    with open(os.path.join(args.out, "intrinsics.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    return 0


def triton_cdiv(a, b):
    return -(-a // b)


if __name__ == "__main__":
    sys.exit(main())
