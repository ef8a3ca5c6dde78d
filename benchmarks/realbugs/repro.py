"""Reproduce, on the CPU with triton_trace, each finding of REALBUGS.md from a checkout of the library.

    python benchmarks/realbugs/repro.py attn_res_blocks    --liger /path/to/Liger-Kernel
    python benchmarks/realbugs/repro.py attn_res_int32     --liger /path/to/Liger-Kernel
    python benchmarks/realbugs/repro.py group_norm         --liger /path/to/Liger-Kernel
    python benchmarks/realbugs/repro.py liger_ce_softcap   --liger /path/to/Liger-Kernel
    python benchmarks/realbugs/repro.py liger_softmax_int32 --liger /path/to/Liger-Kernel
    python benchmarks/realbugs/repro.py fla_layernorm_race --fla /path/to/flash-linear-attention
    python benchmarks/realbugs/repro.py fla_gla_inf        --fla /path/to/flash-linear-attention
    python benchmarks/realbugs/repro.py unsloth_ce_softcap --unsloth /path/to/unsloth [--gpu]

Each prints what the library computed against torch and triton_trace's report (findings only; the hints are
left out). The Liger cases need torch and Triton only; the fla ones need einops (fla imports it) and run
through triton_trace's CUDA-on-CPU redirect answering as an H200, the GPU fla's launch heuristics see.
The unsloth case loads unsloth's kernel modules alone (stand-ins for the package's heavy imports: transformers,
unsloth_zoo, bitsandbytes); with ``--gpu`` it runs the same trigger on CUDA, untraced, against torch there.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import types

import torch

import triton_trace


def _report():
    rep = triton_trace.analyze(triton_trace.current_trace())
    lines = [l for l in rep.summary().splitlines() if "[hint]" not in l and "[compiled]" not in l]
    print("\n".join(lines))
    return rep


def _liger(path):
    sys.path.insert(0, os.path.join(path, "src"))


def _fla(path):
    """fla's package __init__ imports transformers: load its kernel modules without it."""
    pkg = types.ModuleType("fla")
    pkg.__path__ = [os.path.join(path, "fla")]
    pkg.__version__ = "0.5.2"
    sys.modules["fla"] = pkg


def attn_res_blocks(a):
    """N = 40 > 32 blocks: the kernels unroll at most 32 (MAX_BLOCKS); blocks 32.. are dropped."""
    _liger(a.liger)
    import liger_kernel.ops.attn_res as ar
    ar._attn_res_fwd_kernel = triton_trace.trace(outputs=("Out_ptr", "Alpha_ptr", "RSTD_ptr"))(ar._attn_res_fwd_kernel)
    ar._attn_res_bwd_kernel = triton_trace.trace(outputs=("dV_ptr",))(ar._attn_res_bwd_kernel)
    torch.manual_seed(0)
    N, B, T, D = 40, 2, 3, 64
    V = torch.randn(N, B, T, D, requires_grad=True)
    wq, wn = torch.randn(D), torch.ones(D)
    h = ar.LigerAttnResFunction.apply(V, wq, wn, 1e-6)
    Vr = V.detach().clone().requires_grad_(True)
    K = Vr * torch.rsqrt(Vr.pow(2).mean(-1, keepdim=True) + 1e-6) * wn
    hr = torch.einsum("nbt,nbtd->btd", torch.softmax(torch.einsum("d,nbtd->nbt", wq, K), 0), Vr)
    g = torch.randn_like(h)
    h.backward(g)
    hr.backward(g)
    print(f"N={N}: forward max |liger - torch| = {(h - hr).abs().max():.3g} (torch max |h| {hr.abs().max():.3g}); "
          f"dV max |liger - torch| = {(V.grad - Vr.grad).abs().max():.3g}")
    _report()


def attn_res_int32(a):
    """(N-1) * B*T * D = 2**31: the block offset i * n_tokens * D wraps. Only token 0's program runs, so V's
    4.8 GB are address space, not memory (the wrap depends on the block index, not on the token)."""
    _liger(a.liger)
    import liger_kernel.ops.attn_res as ar
    N, NT, D = 9, 65536, 4096
    V = torch.empty(N, NT, D, dtype=torch.bfloat16)
    V[:, 0, :] = torch.randn(N, D, dtype=torch.bfloat16)
    Out = torch.empty(NT, D, dtype=torch.bfloat16)
    Alpha, RSTD = torch.empty(NT, N), torch.empty(NT, N)
    triton_trace.trace(ar._attn_res_fwd_kernel)[(1,)](
        V, torch.randn(D), torch.ones(D), Out, Alpha, RSTD, N, NT, D, 1e-6,
        BLOCK_D=4096, MAX_BLOCKS=ar._get_max_blocks(N), num_warps=8)        # the wrapper's own arguments
    print(f"V [{N}, {NT}, {D}] bf16 ({N * NT * D:,} elements); block {N - 1} starts at element {(N - 1) * NT * D:,}")
    _report()


def group_norm(a):
    """Groups of equal values: variance = E[x^2] - E[x]^2 comes out below -eps; rsqrt gives NaN."""
    _liger(a.liger)
    from liger_kernel.ops.group_norm import LigerGroupNormFunction
    C = 4
    for v in (100.3, 200.0 + 1e-3 * torch.randn(1, C, 1000)):
        x = torch.full((1, C, 1000), v) if isinstance(v, float) else v
        w, b = torch.ones(C), torch.zeros(C)
        triton_trace.reset()
        with triton_trace.trace_all():
            y = LigerGroupNormFunction.apply(x, w, b, C, 1, 1e-5)
        ref = torch.nn.functional.group_norm(x, 1, w, b, 1e-5)
        what = "constant 100.3" if isinstance(v, float) else "200 + 1e-3 * randn"
        print(f"group of {what}: liger NaN {int(torch.isnan(y).sum())} of {y.numel()}, "
              f"max |liger - torch| = {(y - ref).abs().nan_to_num(float('inf')).max():.3g} (torch max |y| {ref.abs().max():.3g})")
        _report()


def fla_layernorm_race(a):
    """T = 50 rows on a 132-SM GPU: NS = 50 programs own BS = 1 row each but store whole BT-row tiles of dx."""
    _fla(a.fla)
    import triton_trace.suite
    with triton_trace.suite.cuda_on_cpu("H200"):
        from fla.modules.layernorm import rms_norm
        torch.manual_seed(0)
        x = torch.randn(50, 512, device="cuda", requires_grad=True)
        w = torch.randn(512, device="cuda", requires_grad=True)
        rms_norm(x, w, None).backward(torch.ones(50, 512, device="cuda"))
    _report()


def fla_gla_inf(a):
    """GLA with strong gates: the intra-chunk kernel stores exp2(g_i - g_j) = inf above the diagonal of A and
    zeroes that triangle right after (same program): A ends finite. A false finding of triton_trace."""
    _fla(a.fla)
    import torch.nn.functional as F
    import triton_trace.suite
    with triton_trace.suite.cuda_on_cpu("H200"):
        from fla.ops.gla import chunk_gla
        torch.manual_seed(0)
        B, T, H, D = 1, 64, 1, 64
        q, k, v = (torch.randn(B, T, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
        g = F.logsigmoid(torch.rand(B, T, H, D, device="cuda", dtype=torch.float16)) / 0.05   # gates of -6..-14
        o, _ = chunk_gla(q, k, v, g)
        print("output finite:", bool(torch.isfinite(o).all()))
    _report()


def _stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def unsloth_kernels(path, name="cross_entropy_loss"):
    """unsloth/kernels/<name>.py imported without unsloth's package __init__: stand-in modules for what its
    kernels' modules import from transformers, unsloth_zoo, unsloth.device_type and unsloth.kernels.fp8."""
    try:
        from packaging.version import Version
    except ImportError:                          # only torch's version is compared: "2.11.0+cu130" -> (2, 11, 0)
        def Version(text):
            return tuple(int(p) for p in text.split("+")[0].split(".")[:3] if p.isdigit())
    import torch.nn
    root = os.path.join(path, "unsloth")
    for pkg in ("transformers", "transformers.models", "transformers.models.llama", "unsloth_zoo"):
        _stub(pkg).__path__ = []
    _stub("transformers.models.llama.modeling_llama", logger=logging.getLogger("unsloth"),
          LlamaRMSNorm=torch.nn.Module)
    _stub("unsloth_zoo.utils", Version=Version)
    _stub("unsloth_zoo.loss_utils", patch_loss_functions=lambda *a, **k: None,
          post_patch_loss_function=lambda *a, **k: None)
    _stub("unsloth").__path__ = [root]
    _stub("unsloth.device_type", is_hip=lambda: False, get_device_type=lambda: "cuda", DEVICE_TYPE="cuda",
          DEVICE_TYPE_TORCH="cuda", DEVICE_COUNT=torch.cuda.device_count(), ALLOW_PREQUANTIZED_MODELS=True)
    _stub("unsloth.bnb_availability", native_kernels_ready=lambda *a, **k: False)
    _stub("unsloth.kernels").__path__ = [os.path.join(root, "kernels")]
    _stub("unsloth.kernels.fp8", weight_dequant=None, fp8_linear=None)     # utils imports these two names
    return importlib.import_module("unsloth.kernels." + name)


def softcap_trigger(device="cpu"):
    """(label, logits [1, rows, V], labels [1, rows], softcap) of each trigger: the padded lanes of the last
    block sit at -softcap after the cap, so they count in the logsumexp."""
    torch.manual_seed(0)
    out = []
    z = torch.full((1, 2, 1000), -1e4, device=device)       # V=1000 -> BLOCK 1024: 24 padded lanes
    z[0, :, 0] = -1e4 + 1
    out.append(("V=1000 softcap=30, logits all about -1e4", z, torch.tensor([[0, 5]], device=device), 30.0))
    out.append(("V=1000 softcap=1, randn logits", torch.randn(1, 4, 1000, device=device),
                torch.randint(0, 1000, (1, 4), device=device), 1.0))
    z = torch.full((1, 2, 256000), -1e4, device=device)     # Gemma's vocabulary: 4 chunks of 65536, 6144 padded
    z[0, :, 7] = -1e4 + 1
    out.append(("V=256000 (chunked) softcap=30, logits all about -1e4", z,
                torch.tensor([[7, 100]], device=device), 30.0))
    return out


def _softcap_reference(z, labels, cap):
    """(torch's loss, what a kernel that counts the padded lanes at -cap computes), mean over the rows."""
    V = z.shape[-1]
    capped = (cap * torch.tanh(z.float() / cap)).view(-1, V)
    block = 65536 if V > 65536 else 1 << (V - 1).bit_length()
    npad = -V % block
    padded = torch.cat([capped, torch.full((capped.shape[0], npad), -cap, device=z.device)], 1)
    picked = capped.gather(1, labels.view(-1, 1))[:, 0]
    return ((torch.logsumexp(capped, 1) - picked).mean().item(),
            (torch.logsumexp(padded, 1) - picked).mean().item())


def unsloth_ce_softcap(a):
    """Softcapped cross entropy (Gemma 2's final_logit_softcapping): the logits are loaded with other=-inf,
    then capped, cap * tanh(-inf) = -cap: the padded lanes of the last block enter the sum of exp."""
    ce = unsloth_kernels(a.unsloth)
    dev = "cuda" if a.gpu else "cpu"
    for label, z, labels, cap in softcap_trigger(dev):
        triton_trace.reset()
        if a.gpu:
            loss = ce.fast_cross_entropy_loss(z.clone(), labels, cap, 0).item()
        else:
            with triton_trace.trace_all():
                loss = ce.fast_cross_entropy_loss(z.clone(), labels, cap, 0).item()
        right, counted = _softcap_reference(z, labels, cap)
        print(f"{label}: unsloth loss {loss:.6f}, torch {right:.6f} (with the padded lanes counted: {counted:.6f})")
        if not a.gpu:
            _report()


def liger_ce_softcap(a):
    """Liger's cross entropy with softcap (Gemma 2): the logits are loaded with other=-inf and capped,
    cap * tanh(-inf) = -cap, so the padded lanes of the last block of each row enter the online sum of exp."""
    _liger(a.liger)
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    torch.manual_seed(0)
    for V, cap, how in ((1000, 30.0, "logits all about -1e4"), (40000, 30.0, "logits all about -1e4"),
                        (1000, 1.0, "randn logits")):
        z = torch.randn(2, V) if how == "randn logits" else torch.full((2, V), -1e4)
        if how != "randn logits":
            z[:, 0] += 1
        y = torch.tensor([0, 5])
        triton_trace.reset()
        with triton_trace.trace_all():
            out = LigerCrossEntropyFunction.apply(z.clone(), y, None, -100, 0.0, 0.0, "mean", cap, False, False, False)
        loss = (out[0] if isinstance(out, tuple) else out).item()
        ref = torch.nn.functional.cross_entropy(cap * torch.tanh(z / cap), y).item()
        print(f"V={V} softcap={cap}, {how}: liger loss {loss:.6f}, torch {ref:.6f}")
        _report()


def liger_softmax_int32(a):
    """Liger's softmax: row_id * X_row_stride in int32. Rows 2**20 elements apart (a strided view, so the
    8 GB are address space): row 2048 starts at element 2**31, which wraps to -2**31. The contiguous case
    the wrapper passes wraps the same way once n_rows * n_cols >= 2**31, e.g. [32769, 65536]."""
    _liger(a.liger)
    import liger_kernel.ops.softmax as sm
    from liger_kernel.ops.utils import calculate_settings
    R, S, C = 2049, 1 << 20, 1024
    base = torch.empty(R, S, dtype=torch.bfloat16)
    x = base[:, :C]
    x.copy_(torch.randn(R, C, dtype=torch.bfloat16))
    y = torch.empty(R, C, dtype=torch.bfloat16)
    block, num_warps = calculate_settings(C)
    triton_trace.trace(programs=lambda p: p[0] >= R - 3)(sm._softmax_single_block_forward_kernel)[(R,)](
        y, y.stride(0), x, x.stride(0), C, BLOCK_SIZE=block, num_warps=num_warps)
    ok = [torch.allclose(y[r].float(), torch.softmax(x[r].float(), 0), atol=1e-2) for r in (R - 2, R - 1)]
    print(f"X [{R}, {C}] bf16, row stride {S}: row {R - 2} right: {ok[0]}, row {R - 1} (starts at 2**31) right: {ok[1]}")
    _report()


FINDINGS = {f.__name__: f for f in (attn_res_blocks, attn_res_int32, group_norm, fla_layernorm_race, fla_gla_inf,
                                    unsloth_ce_softcap, liger_ce_softcap, liger_softmax_int32)}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("finding", choices=sorted(FINDINGS))
    ap.add_argument("--liger", default="/tmp/rb/liger", help="a Liger-Kernel checkout (its src/ is imported)")
    ap.add_argument("--fla", default="/tmp/suites/fla", help="a flash-linear-attention checkout")
    ap.add_argument("--unsloth", default="/tmp/rb2/unsloth", help="an unsloth checkout (its unsloth/kernels)")
    ap.add_argument("--gpu", action="store_true", help="unsloth_ce_softcap only: run on CUDA, untraced")
    FINDINGS[ap.parse_args().finding](ap.parse_args())
