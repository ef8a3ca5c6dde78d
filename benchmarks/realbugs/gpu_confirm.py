"""Confirm on a real GPU the bugs triton_trace found in public kernels (REALBUGS.md), one subprocess per case.

    python benchmarks/realbugs/gpu_confirm.py                # on the GPU machine: every case, results to $OUT
    python benchmarks/realbugs/gpu_confirm.py --dry          # here, no GPU: the same logic on small shapes,
                                                             # CUDA tensors on the CPU (triton_trace.suite)

The library sources travel in benchmarks/realbugs/vendor/ (listed in .git/info/exclude, named in `carry`):
Liger-Kernel at ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c (src/liger_kernel), flash-linear-attention at
bc3b101dcb713ddc5bd8924b66754eb68b5ccf89 (fla/), einops (fla imports it). Each case runs in its own process
because an illegal memory access leaves the CUDA context unusable; the int32 case also runs once under
compute-sanitizer memcheck. Every number is measured against torch on the same device.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "vendor")


def _setup():
    sys.path.insert(0, VENDOR)


def _device(dry: bool) -> str:
    return "cuda"          # in a dry run, triton_trace's CUDA-on-CPU redirect answers for it (_child)


def _sync(dev):
    import torch
    if dev == "cuda":
        torch.cuda.synchronize()


def case_attn_res_blocks(dry: bool) -> dict:
    """Liger AttnRes with N = 40 > 32 blocks: blocks 32.. are dropped from the forward, dV[32:] never written."""
    import torch
    from liger_kernel.ops.attn_res import LigerAttnResFunction
    dev = _device(dry)
    N, B, T, D = (40, 2, 3, 64) if dry else (40, 2, 64, 256)
    torch.manual_seed(0)
    V = torch.randn(N, B, T, D, device=dev, requires_grad=True)
    wq = torch.randn(D, device=dev) * 0.5
    wn = torch.ones(D, device=dev)
    # the caching allocator hands the freed NaN block to the next allocation of the same size (dV's
    # torch.empty_like): elements no program writes keep NaN, as they keep garbage in real use
    junk = torch.full((N, B * T, D), float("nan"), device=dev)
    del junk
    h = LigerAttnResFunction.apply(V, wq, wn, 1e-6)
    Vr = V.detach().clone().requires_grad_(True)
    K = Vr * torch.rsqrt(Vr.pow(2).mean(-1, keepdim=True) + 1e-6) * wn
    alpha = torch.softmax(torch.einsum("d,nbtd->nbt", wq, K), 0)
    hr = torch.einsum("nbt,nbtd->btd", alpha, Vr)
    g = torch.randn_like(h)
    h.backward(g)
    hr.backward(g)
    _sync(dev)
    return {"shape": [N, B, T, D], "forward_max_abs_err": float((h - hr).abs().max()),
            "forward_ref_max_abs": float(hr.abs().max()),
            "dV_blocks_ge_32_nonfinite": int((~torch.isfinite(V.grad[32:])).sum()),
            "dV_blocks_ge_32_elements": int(V.grad[32:].numel()),
            "dV_blocks_lt_32_max_abs_err": float((V.grad[:32] - Vr.grad[:32]).abs().max())}


def case_attn_res_int32(dry: bool, sanitizer: bool = False) -> dict:
    """Liger AttnRes forward with (N-1) * B*T * D >= 2**31: the block offset i * n_tokens * D wraps in int32."""
    import torch
    from liger_kernel.ops.attn_res import LigerAttnResFunction
    dev = _device(dry)
    N, NT, D = (9, 64, 64) if dry else (9, 65536, 4096)
    torch.manual_seed(0)
    V = torch.empty(N, NT, D, device=dev, dtype=torch.bfloat16)
    if not sanitizer:
        V.normal_()
    wq = torch.randn(D, device=dev, dtype=torch.bfloat16) * 0.02
    wn = torch.ones(D, device=dev, dtype=torch.bfloat16)
    out = {"shape": [N, NT, D], "elements": N * NT * D, "max_block_offset": (N - 1) * NT * D}
    t0 = time.time()
    try:
        h = LigerAttnResFunction.apply(V, wq, wn, 1e-6)
        _sync(dev)
    except RuntimeError as e:
        out.update(error=str(e).splitlines()[0][:300], seconds=round(time.time() - t0, 2))
        return out
    # reference on the first 64 tokens (the wrap hits every token: it depends on the block index only)
    Vs = V[:, :64].float()
    K = (Vs * torch.rsqrt(Vs.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16).float() * wn.float()
    alpha = torch.softmax(torch.einsum("d,ntd->nt", wq.float(), K), 0)
    hr = torch.einsum("nt,ntd->td", alpha, Vs)
    out.update(max_abs_err_first_64_tokens=float((h[:64].float() - hr).abs().max()),
               ref_max_abs=float(hr.abs().max()), seconds=round(time.time() - t0, 2))
    return out


def case_group_norm(dry: bool) -> dict:
    """Liger GroupNorm forward on groups of (nearly) constant values: variance as E[x^2] - E[x]^2 cancels."""
    import torch
    from liger_kernel.ops.group_norm import LigerGroupNormFunction
    dev = _device(dry)
    C, G, HW = 8, 2, (1000 if dry else 4096)
    values = torch.linspace(1.0, 1000.0, 16 if dry else 256, dtype=torch.float64)
    x = values.float().to(dev)[:, None, None].expand(-1, C, HW).contiguous()     # one constant per sample
    w, b = torch.ones(C, device=dev), torch.zeros(C, device=dev)
    y = LigerGroupNormFunction.apply(x, w, b, C, G, 1e-5)
    ref = torch.nn.functional.group_norm(x, G, w, b, 1e-5)
    bad = ~torch.isfinite(y.reshape(len(values), G, -1)).all(-1)
    # a group of spread 1e-3 around 200 (not constant): finite, but how far from torch?
    torch.manual_seed(0)
    x2 = (200.0 + 1e-3 * torch.randn(4, C, HW, dtype=torch.float64)).float().to(dev)
    y2 = LigerGroupNormFunction.apply(x2, w, b, C, G, 1e-5)
    ref2 = torch.nn.functional.group_norm(x2, G, w, b, 1e-5)
    _sync(dev)
    return {"constant_groups": int(bad.numel()), "constant_groups_nonfinite": int(bad.sum()),
            "first_nonfinite_values": [float(v) for v in values[bad.any(-1).cpu()][:6]],
            "torch_nonfinite": int((~torch.isfinite(ref)).sum()),
            "spread_1e-3_around_200_max_abs_err": float((y2 - ref2).abs().max()),
            "spread_case_ref_max_abs": float(ref2.abs().max())}


def case_fla_layernorm_race(dry: bool) -> dict:
    """fla layer_norm_bwd_kernel with T = 50 rows (BS = 1 < BT): the dx race is benign; its values match torch."""
    import types
    import torch
    sys.path.insert(0, os.path.join(VENDOR, "fla_src"))
    pkg = types.ModuleType("fla")                 # fla/__init__.py imports transformers: load the modules only
    pkg.__path__ = [os.path.join(VENDOR, "fla_src", "fla")]
    pkg.__version__ = "0.5.2"
    sys.modules["fla"] = pkg
    from fla.modules.layernorm import rms_norm
    dev = _device(dry)
    T, D = 50, 512
    torch.manual_seed(0)
    x = torch.randn(T, D, device=dev, requires_grad=True)
    w = torch.randn(D, device=dev, requires_grad=True)
    y = rms_norm(x, w, None)
    xr, wr = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    yr = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-5) * wr
    g = torch.randn_like(y)
    y.backward(g)
    yr.backward(g)
    _sync(dev)
    return {"dx_max_abs_err": float((x.grad - xr.grad).abs().max()), "dw_max_abs_err": float((w.grad - wr.grad).abs().max()),
            "sms": torch.cuda.get_device_properties(0).multi_processor_count}


CASES = {"attn_res_blocks": case_attn_res_blocks, "attn_res_int32": case_attn_res_int32,
         "group_norm": case_group_norm, "fla_layernorm_race": case_fla_layernorm_race}


def _child(args) -> None:
    _setup()
    fn = CASES[args.case]
    with contextlib.ExitStack() as stack:
        if args.dry:          # no GPU here: CUDA tensors on the CPU, every launch through the interpreter
            import triton_trace.suite
            stack.enter_context(triton_trace.suite.cuda_on_cpu("H100", trace=False))
        res = fn(args.dry, sanitizer=True) if args.sanitizer else fn(args.dry)
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


def _run(cmd, env, timeout) -> tuple:
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        text, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = f"{e.stdout or ''}{e.stderr or ''}\nTIMEOUT after {timeout} s", 124
    return rc, text, round(time.time() - t0, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry", action="store_true", help="no GPU: small shapes in Triton's interpreter")
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--sanitizer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", default="", help="comma-separated cases (default: all)")
    args = ap.parse_args()
    if args.case:
        _child(args)
        return 0
    out_dir = os.environ.get("OUT") or os.path.join(HERE, "gpu_out")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    me = [sys.executable, os.path.abspath(__file__)] + (["--dry"] if args.dry else [])
    runs = [(c, me + ["--case", c]) for c in (args.only.split(",") if args.only else CASES)]
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer and not args.dry and (not args.only or "attn_res_int32" in args.only):
        runs.append(("attn_res_int32 under memcheck", [sanitizer, "--tool", "memcheck", "--print-limit", "4"]
                     + me + ["--case", "attn_res_int32", "--sanitizer"]))
    results = {}
    with open(os.path.join(out_dir, "gpu_confirm.log"), "w") as log:
        for name, cmd in runs:
            rc, text, secs = _run(cmd, env, 240)
            res = [json.loads(l[7:]) for l in text.splitlines() if l.startswith("RESULT ")]
            results[name] = {"rc": rc, "seconds": secs, "result": res[0] if res else None,
                             "tail": None if res and rc == 0 else text[-2500:]}
            if "memcheck" in name:
                results[name]["sanitizer_lines"] = [l for l in text.splitlines()
                                                    if "Invalid" in l or "ERROR SUMMARY" in l or "Address" in l][:12]
            log.write(f"==== {name} (rc {rc}, {secs} s)\n$ {' '.join(cmd)}\n{text}\n")
            print(f"{name}: rc {rc}, {secs} s, {json.dumps(results[name]['result'], sort_keys=True)}", flush=True)
    import torch
    import triton
    meta = {"torch": torch.__version__, "triton": triton.__version__, "dry": args.dry,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (interpreter)"}
    with open(os.path.join(out_dir, "gpu_confirm.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1, sort_keys=True)
    print(json.dumps(meta, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
