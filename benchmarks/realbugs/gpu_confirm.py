"""Confirm on a real GPU the bugs triton_trace found in public kernels (REALBUGS.md), one subprocess per case.

    python benchmarks/realbugs/gpu_confirm.py                # on the GPU machine: every case, results to $OUT
    python benchmarks/realbugs/gpu_confirm.py --dry          # here, no GPU: the same logic on small shapes,
                                                             # CUDA tensors on the CPU (triton_trace.suite)

The library sources travel in benchmarks/realbugs/vendor/ (listed in .git/info/exclude, named in `carry`):
Liger-Kernel at ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c (liger_kernel/ = its src/liger_kernel),
flash-linear-attention at bc3b101dcb713ddc5bd8924b66754eb68b5ccf89 (fla_src/fla), einops (fla imports it),
unsloth at 015bdef0d94a241bcd94eec7a405b1700632180d (unsloth_src/unsloth/kernels/{cross_entropy_loss,utils}.py
only: the package's heavy imports are stood in for, as in repro.py). Each case runs in its own process
because an illegal memory access leaves the CUDA context unusable; the int32 cases (attn_res_int32,
liger_softmax_int32) also run once under compute-sanitizer memcheck. Every number is measured against torch
on the same device; the newer cases (bugs 5-7) also return `confirmed`, decided by that comparison. Each run
has its own timeout and the whole script a budget (BUDGET_S), so one hung case cannot eat the GPU session.
A dry run writes to $OUT or a temporary folder, never over gpu_out/ (the GPU run's results).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


# ---- bugs 5 and 6: softcapped cross entropy counts the padded lanes of the last block ---------------------

def _stub(name, **attrs):
    import types
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def _unsloth_ce():
    """unsloth/kernels/cross_entropy_loss.py imported without unsloth's package __init__ (repro.py's
    unsloth_kernels): stand-ins for what it and kernels/utils.py import from transformers, unsloth_zoo,
    bitsandbytes, unsloth.device_type and unsloth.kernels.fp8."""
    import importlib
    import logging
    import torch
    try:
        from packaging.version import Version
    except ImportError:                          # only torch's version is compared: "2.11.0+cu130" -> (2, 11, 0)
        def Version(text):
            return tuple(int(p) for p in text.split("+")[0].split(".")[:3] if p.isdigit())
    root = os.path.join(VENDOR, "unsloth_src", "unsloth")
    for pkg in ("transformers", "transformers.models", "transformers.models.llama", "unsloth_zoo"):
        _stub(pkg).__path__ = []
    _stub("transformers.models.llama.modeling_llama", logger=logging.getLogger("unsloth"),
          LlamaRMSNorm=torch.nn.Module)
    _stub("unsloth_zoo.utils", Version=Version)
    _stub("unsloth_zoo.loss_utils", patch_loss_functions=lambda *a, **k: None,
          post_patch_loss_function=lambda *a, **k: None)
    _stub("unsloth").__path__ = [root]
    # the device count only sizes utils.py's stream table (bitsandbytes paths), read through a CUDA build's
    # torch._C: 0 on a CPU build (a dry run, where the redirect answers device_count() with 1)
    count = torch.cuda.device_count() if hasattr(torch._C, "_cuda_getCurrentRawStream") else 0
    _stub("unsloth.device_type", is_hip=lambda: False, get_device_type=lambda: "cuda", DEVICE_TYPE="cuda",
          DEVICE_TYPE_TORCH="cuda", DEVICE_COUNT=count, ALLOW_PREQUANTIZED_MODELS=True)
    _stub("unsloth.bnb_availability", native_kernels_ready=lambda *a, **k: False)
    _stub("unsloth.kernels").__path__ = [os.path.join(root, "kernels")]
    _stub("unsloth.kernels.fp8", weight_dequant=None, fp8_linear=None)     # utils imports these two names
    return importlib.import_module("unsloth.kernels.cross_entropy_loss")


def _softcap_refs(z, y, cap, block, ignore_index=-100):
    """(torch's loss: F.cross_entropy of cap * tanh(z / cap), mean over the rows not ignored; the loss of a
    kernel that counts the padded lanes of each row's last block of `block` lanes at -cap)."""
    import torch
    import torch.nn.functional as F
    capped = cap * torch.tanh(z.double() / cap)
    right = F.cross_entropy(capped, y, ignore_index=ignore_index)
    npad = -z.shape[-1] % block
    padded = torch.cat([capped, torch.full((z.shape[0], npad), -cap, dtype=capped.dtype, device=z.device)], 1)
    counted = F.cross_entropy(padded, y, ignore_index=ignore_index)
    return float(right), float(counted), npad


def _judge(loss, right, counted, wrong_by=1e-3, tol=2e-4) -> dict:
    """a softcap trigger's numbers: wrong (the loss is off torch's by more than wrong_by) and explained (it
    equals the padded-lanes model within tol)."""
    return {"loss": loss, "torch": right, "padded_lanes_model": counted, "off_by": loss - right,
            "wrong": abs(loss - right) > wrong_by, "explained": abs(loss - counted) < tol}


def _grad_numbers(g, ref, lab) -> dict:
    """the logits' gradient against torch's. Off the label, a lane's gradient is softmax * cap'(z) / rows:
    a softmax divided by a sum of exp too large by e^off is e^-off times torch's there."""
    import torch
    off_label = torch.ones_like(ref, dtype=torch.bool)
    off_label[torch.arange(ref.shape[0]), lab] = False
    ratio = (g.double() / ref.double())[off_label & (ref.abs() > 1e-12)]
    return {"grad_max_abs_err": float((g - ref).abs().max()), "grad_ref_max_abs": float(ref.abs().max()),
            "grad_off_label_ratio_to_torch": [float(ratio.min()), float(ratio.median()), float(ratio.max())]}


def _ce_triggers(dev, dry):
    """(label, logits [rows, V], labels, softcap) of the triggers of REALBUGS.md 5 and 6, with a control."""
    import torch
    torch.manual_seed(0)
    out = []
    for V in (1000, 40000, 256000):
        z = torch.full((2, V), -1e4, device=dev)
        z[:, 0] += 1.0
        lab = torch.tensor([0, 5], device=dev)
        out.append((f"V={V} softcap=30, logits about -1e4", z, lab, 30.0))
    out.append(("V=1000 softcap=1, randn logits", torch.randn(4, 1000, device=dev),
                torch.randint(0, 1000, (4,), device=dev), 1.0))
    return out


def case_unsloth_ce_softcap(dry: bool) -> dict:
    """unsloth fast_cross_entropy_loss with logit softcapping: the -inf padding of the last block becomes -cap
    and is counted (REALBUGS.md 5). V=1000 (BLOCK 1024, 24 padded lanes), V=256000 (chunked, 6144 padded);
    control: V=1000 without softcapping."""
    import torch
    ce = _unsloth_ce()
    dev = _device(dry)
    out, verdicts = {}, []
    for label, z, lab, cap in _ce_triggers(dev, dry):
        V = z.shape[-1]
        if V == 40000:
            continue                                   # 1 block of 65536 in unsloth: the same as V=1000
        block = 65536 if V > 65536 else 1 << (V - 1).bit_length()
        zz = z.clone().requires_grad_(True)
        loss = ce.fast_cross_entropy_loss(zz.view(1, *z.shape), lab.view(1, -1), cap, 0)
        right, counted, npad = _softcap_refs(z, lab, cap, block)
        r = _judge(float(loss.detach()), right, counted)
        r["padded_lanes"] = npad
        if cap == 1.0:                                 # the backward divides by the saved (too large) lse
            loss.backward()
            zr = z.clone().requires_grad_(True)
            torch.nn.functional.cross_entropy(cap * torch.tanh(zr / cap), lab).backward()
            r.update(_grad_numbers(zz.grad, zr.grad, lab))
        out[label] = r
        verdicts.append(r["wrong"] and r["explained"])
    torch.manual_seed(1)
    z = torch.randn(4, 1000, device=dev)
    lab = torch.randint(0, 1000, (4,), device=dev)
    loss = float(ce.fast_cross_entropy_loss(z.clone().view(1, 4, 1000), lab.view(1, -1), 0, 0))
    ref = float(torch.nn.functional.cross_entropy(z.double(), lab))
    out["control V=1000 no softcap, randn logits"] = {"loss": loss, "torch": ref, "abs_err": abs(loss - ref)}
    _sync(dev)
    out["confirmed"] = all(verdicts) and abs(loss - ref) < 2e-4
    return out


def case_liger_ce_softcap(dry: bool) -> dict:
    """Liger cross entropy (and fused linear cross entropy) with softcap: the same defect in its online
    softmax (REALBUGS.md 6). BLOCK = min(32768, next_power_of_2(V)): 24 padded lanes at V=1000, 25,536 at
    V=40000, 6,144 at V=256000; control: V=1000 without softcap."""
    import torch
    import torch.nn.functional as F
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
    dev = _device(dry)
    out, verdicts = {}, []

    def liger(z, lab, cap, grad=False):
        zz = z.clone().requires_grad_(grad)
        res = LigerCrossEntropyFunction.apply(zz, lab, None, -100, 0.0, 0.0, "mean", cap, False, False, False)
        return (res[0] if isinstance(res, tuple) else res), zz

    for label, z, lab, cap in _ce_triggers(dev, dry):
        V = z.shape[-1]
        if dry and V == 256000:
            continue                                   # 8 blocks of 32768 per row: slow in the interpreter
        block = min(32768, 1 << (V - 1).bit_length())
        loss, zz = liger(z, lab, cap, grad=cap == 1.0)
        right, counted, npad = _softcap_refs(z, lab, cap, block)
        r = _judge(float(loss.detach()), right, counted)
        r["padded_lanes"] = npad
        if cap == 1.0:                                 # the gradient pass divides by the same d
            loss.backward()
            zr = z.clone().requires_grad_(True)
            F.cross_entropy(cap * torch.tanh(zr / cap), lab).backward()
            r.update(_grad_numbers(zz.grad, zr.grad, lab))
        out[label] = r
        verdicts.append(r["wrong"] and r["explained"])
    # fused linear cross entropy: BT=5, H=64, V=1000, softcap 1, one row ignored (REALBUGS.md 6)
    torch.manual_seed(2)
    BT, H, V, cap = 5, 64, 1000, 1.0
    x = torch.randn(BT, H, device=dev)
    W = torch.randn(V, H, device=dev) * 0.1
    lab = torch.randint(0, V, (BT,), device=dev)
    lab[2] = -100
    xx = x.clone().requires_grad_(True)
    res = LigerFusedLinearCrossEntropyFunction.apply(xx, W, lab, None, None, -100, 0.0, 0.0, "mean", cap)
    loss = res[0] if isinstance(res, tuple) else res
    right, counted, npad = _softcap_refs((x @ W.t()).double(), lab, cap, 1024)
    r = _judge(float(loss.detach()), right, counted)
    r["padded_lanes"] = npad
    loss.backward()
    xr = x.clone().requires_grad_(True)
    F.cross_entropy(cap * torch.tanh((xr @ W.t()) / cap), lab, ignore_index=-100).backward()
    r["grad_input_max_abs_err"] = float((xx.grad - xr.grad).abs().max())
    r["grad_input_ref_max_abs"] = float(xr.grad.abs().max())
    out["fused_linear_ce BT=5 H=64 V=1000 softcap=1"] = r
    verdicts.append(r["wrong"] and r["explained"])
    torch.manual_seed(1)
    z = torch.randn(4, 1000, device=dev)
    lab = torch.randint(0, 1000, (4,), device=dev)
    loss = float(liger(z, lab, None)[0])
    ref = float(F.cross_entropy(z.double(), lab))
    out["control V=1000 no softcap, randn logits"] = {"loss": loss, "torch": ref, "abs_err": abs(loss - ref)}
    _sync(dev)
    out["confirmed"] = all(verdicts) and abs(loss - ref) < 2e-4
    return out


# ---- bug 7: Liger softmax / sparsemax, row_id * row_stride in int32 ------------------------------------------

WRAP = 1 << 31


def _int32_rows(dry: bool, dev, dtype_gpu, cols_gpu=65536):
    """The shapes of bug 7. GPU: [2**31 / cols + 1, cols] contiguous (the wrapper's own layout), e.g.
    [32769, 65536]: the last row starts at element 2**31. Dry (no 8 GB here): bf16 rows 2**20 elements apart
    (a strided view, REALBUGS.md 7), row 2048 starts at 2**31. (rows, cols, row stride, dtype, the rows whose
    int32 start wraps)."""
    import torch
    R, C, S = (2049, 1024, 1 << 20) if dry else (WRAP // cols_gpu + 1, cols_gpu, cols_gpu)
    dtype = torch.bfloat16 if dry else dtype_gpu
    wraps = [r for r in range(R) if r * S >= WRAP]          # int32 r * S wraps to r * S - 2**32
    return R, C, S, dtype, wraps


def _padded(R, C, S, dtype, dev, fill=None):
    """(buffer, pad, rows view): WRAP elements of pad, then the [R, C] rows of stride S. A row whose int32
    start wraps to -2**31 lands on pad[:C] (pad row 0), inside our own allocation: no crash, and the row the
    kernel read or wrote there can be compared."""
    import torch
    buf = torch.empty(WRAP + (R - 1) * S + C, device=dev, dtype=dtype)
    rows = torch.as_strided(buf, (R, C), (S, 1), WRAP)
    if fill is not None:
        buf[:C].fill_(fill)
        rows.fill_(fill)
    return buf, buf[:WRAP], rows


def _rowwise_err(y, x, ref_fn):
    """max |y - ref| / max |ref| of every row (inf where y is not finite), 2**26 elements at a time."""
    import torch
    chunk = max(1, (1 << 26) // x.shape[1])
    errs = []
    for i in range(0, x.shape[0], chunk):
        ref = ref_fn(x[i:i + chunk].float())
        yy = y[i:i + chunk].float()
        e = (yy - ref).abs().amax(1) / ref.abs().amax(1).clamp_min(1e-30)
        errs.append(torch.where(torch.isfinite(yy).all(1), e, torch.full_like(e, float("inf"))))
    return torch.cat(errs)


def _sparsemax_ref(x):
    import torch
    z = torch.sort(x, -1, descending=True).values
    k = torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=x.dtype)
    css = z.cumsum(-1)
    support = 1 + k * z > css
    kk = support.sum(-1, keepdim=True)
    tau = (css.gather(-1, kk - 1) - 1) / kk
    return (x - tau).clamp_min(0)


def _int32_verdict(out, err, wraps, tol, y_rows, ypad_row0, pad_ref, R):
    import torch
    bad = torch.nonzero(~(err <= tol)).flatten().tolist()
    out.update(rows=R, wrapping_rows=wraps, wrong_rows=bad[:20], n_wrong_rows=len(bad),
               max_rel_err_other_rows=float(err[[r for r in range(R) if r not in wraps]].max()),
               wrapping_rows_nonfinite=[int((~torch.isfinite(y_rows[r].float())).sum()) for r in wraps[:4]])
    if ypad_row0 is not None:        # what the wrapped program wrote 2**31 elements before the output
        e = float(((ypad_row0.float() - pad_ref).abs().max() / pad_ref.abs().max()))
        out["pad_row0_written_with_the_pad_input_result_rel_err"] = e
    out["confirmed"] = bad == wraps and (ypad_row0 is None or e <= tol)
    return out


def case_liger_softmax_int32(dry: bool, sanitizer: bool = False) -> dict:
    """Liger softmax forward on [32769, 65536] fp32 (8.6 GB): row 32768 starts at element 2**31 and
    row_id * X_row_stride wraps in int32 (REALBUGS.md 7). The input sits after 2**31 elements of pad and the
    output is placed the same way (the caching allocator's freed block, see below), so the wrapped row reads
    pad row 0 and writes 2**31 elements before y: y's last row is never written (NaN planted), the pad row
    holds the softmax of the input's pad row. Under memcheck (sanitizer=True) the input and output are plain
    allocations, as in real use: the wrapped accesses leave every allocation."""
    import torch
    dev = _device(dry)
    R, C, S, dtype, wraps = _int32_rows(dry, dev, torch.float32)
    out = {"shape": [R, C], "row_stride": S, "dtype": str(dtype).replace("torch.", ""),
           "first_wrapped_row_start": wraps[0] * S}
    t0 = time.time()
    if sanitizer:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        x = torch.empty(R, C, device=dev, dtype=dtype)
        try:
            LigerSoftmaxFunction.apply(x)
            _sync(dev)
            out["error"] = None
        except RuntimeError as e:
            out["error"] = str(e).splitlines()[0][:300]
        out["seconds"] = round(time.time() - t0, 2)
        return out
    torch.manual_seed(0)
    xbuf, xpad, x = _padded(R, C, S, dtype, dev)
    if dry:
        x.copy_(torch.randn(R, C, device=dev, dtype=torch.float32))
    else:
        x.normal_()
    xpad[:C].copy_(torch.linspace(-4.0, 4.0, C, device=dev))           # pad row 0: a ramp, unlike any row
    if dry:
        # the wrapper makes x contiguous (no wrap at this size): launch its kernel with its arguments on the
        # strided view, the output laid out the same way
        import liger_kernel.ops.softmax as sm
        from liger_kernel.ops.utils import calculate_settings
        ybuf, ypad, y = _padded(R, C, S, dtype, dev, fill=float("nan"))
        block, num_warps = calculate_settings(C)
        sm._softmax_single_block_forward_kernel[(R,)](y, y.stride(0), x, x.stride(0), C, BLOCK_SIZE=block,
                                                      num_warps=num_warps)
        out["path"] = "kernel launched with the wrapper's arguments on strided views (rows 2**20 apart)"
        planned = True
    else:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        # y = torch.empty_like(x) inside the wrapper: free a NaN-filled block of pad + rows, take its first
        # 2**31 elements as ypad; the caching allocator splits the block and gives the rest to empty_like
        junk = torch.full((WRAP + R * C,), float("nan"), device=dev, dtype=dtype)
        del junk
        ypad = torch.empty(WRAP, device=dev, dtype=dtype)
        try:
            y = LigerSoftmaxFunction.apply(x)
            _sync(dev)
        except RuntimeError as e:
            out.update(error=str(e).splitlines()[0][:300], seconds=round(time.time() - t0, 2),
                       confirmed="illegal memory access" in str(e))
            return out
        planned = y.data_ptr() - ypad.data_ptr() == WRAP * y.element_size()
        out["path"] = "LigerSoftmaxFunction.apply on a contiguous [R, C] tensor"
        out["y_placed_right_after_pad"] = planned
    err = _rowwise_err(y, x, lambda t: torch.softmax(t, -1))
    pad_ref = torch.softmax(xpad[:C].float(), -1)
    out = _int32_verdict(out, err, wraps, 2e-2 if dry else 1e-4, y, ypad[:C] if planned else None, pad_ref, R)
    out["seconds"] = round(time.time() - t0, 2)
    _sync(dev)
    return out


def case_liger_sparsemax_int32(dry: bool) -> dict:
    """Liger sparsemax forward kernel, same int32 row offset (sparsemax.py:23-26): launched with the
    wrapper's arguments on [262145, 8192] fp32 rows already sorted in descending order (so the sorted input
    the wrapper would pass is x itself; sorting 2**31 elements would need ~35 GB more), input and output after
    2**31 elements of pad. Row 262144 starts at 2**31: it reads pad row 0 and writes 2**31 elements before
    the output. 8192 columns rather than 65536: the kernel's cumsum over one block is compiled for a size
    Liger's tests come closer to (they stop at 512); the wrap is the same."""
    import torch
    import liger_kernel.ops.sparsemax as spm
    from liger_kernel.ops.utils import calculate_settings
    dev = _device(dry)
    R, C, S, dtype, wraps = _int32_rows(dry, dev, torch.float32, cols_gpu=8192)
    out = {"shape": [R, C], "row_stride": S, "dtype": str(dtype).replace("torch.", ""),
           "first_wrapped_row_start": wraps[0] * S,
           "path": "_sparsemax_forward_kernel launched with the wrapper's arguments, x_sorted = x (rows descending)"}
    t0 = time.time()
    torch.manual_seed(0)
    xbuf, xpad, x = _padded(R, C, S, dtype, dev)
    ramp = torch.linspace(0.0, -1.0, C, device=dev)                 # descending rows: a + b * ramp, b > 0
    a = torch.randn(R, 1, device=dev)
    b = 0.5 + 4 * torch.rand(R, 1, device=dev)
    for i in range(0, R, 1024):
        x[i:i + 1024].copy_(a[i:i + 1024] + b[i:i + 1024] * ramp)
    xpad[:C].copy_(3.0 + 40.0 * ramp)                               # pad row 0: a steep ramp
    ybuf, ypad, y = _padded(R, C, S, dtype, dev, fill=float("nan"))
    block, num_warps = calculate_settings(C)
    try:
        spm._sparsemax_forward_kernel[(R,)](x, x.stride(0), x, x.stride(0), y, y.stride(0), C,
                                            BLOCK_SIZE=block, num_warps=num_warps)
        _sync(dev)
    except RuntimeError as e:
        out.update(error=str(e).splitlines()[0][:300], seconds=round(time.time() - t0, 2),
                   confirmed="illegal memory access" in str(e))
        return out
    err = _rowwise_err(y, x, _sparsemax_ref)
    pad_ref = _sparsemax_ref(xpad[:C].float()[None])[0]
    out = _int32_verdict(out, err, wraps, 2e-2 if dry else 1e-4, y, ypad[:C], pad_ref, R)
    out["seconds"] = round(time.time() - t0, 2)
    return out


CASES = {"attn_res_blocks": case_attn_res_blocks, "attn_res_int32": case_attn_res_int32,
         "group_norm": case_group_norm, "fla_layernorm_race": case_fla_layernorm_race,
         "unsloth_ce_softcap": case_unsloth_ce_softcap, "liger_ce_softcap": case_liger_ce_softcap,
         "liger_softmax_int32": case_liger_softmax_int32, "liger_sparsemax_int32": case_liger_sparsemax_int32}
SANITIZED = ("attn_res_int32", "liger_softmax_int32")       # also run once under compute-sanitizer memcheck
# seconds each run may take on the GPU (the previous full run: 12-37 s a case, 28.5 s under memcheck) and the
# whole script's budget: a run gets min(its timeout, what is left of the budget), none starts with < 15 s left
TIMEOUT_S = {"attn_res_blocks": 90, "attn_res_int32": 60, "group_norm": 60, "fla_layernorm_race": 90,
             "unsloth_ce_softcap": 75, "liger_ce_softcap": 75, "liger_softmax_int32": 75,
             "liger_sparsemax_int32": 75, "attn_res_int32 under memcheck": 90,
             "liger_softmax_int32 under memcheck": 90}
BUDGET_S = 340


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
    # a dry run never writes over gpu_out/ (the GPU run's results, kept in the repository)
    out_dir = os.environ.get("OUT") or (os.path.join(tempfile.gettempdir(), "gpu_confirm_dry") if args.dry
                                        else os.path.join(HERE, "gpu_out"))
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    me = [sys.executable, os.path.abspath(__file__)] + (["--dry"] if args.dry else [])
    only = [c for c in args.only.split(",") if c] if args.only else list(CASES)
    unknown = [c for c in only if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; cases: {', '.join(CASES)}")
    runs = [(c, me + ["--case", c]) for c in only]
    sanitizer = shutil.which("compute-sanitizer")
    for c in SANITIZED:
        if sanitizer and not args.dry and c in only:
            runs.append((f"{c} under memcheck", [sanitizer, "--tool", "memcheck", "--print-limit", "4"]
                         + me + ["--case", c, "--sanitizer"]))
    results = {}
    start = time.time()
    with open(os.path.join(out_dir, "gpu_confirm.log"), "w") as log:
        for name, cmd in runs:
            # the interpreter (dry) is slow but costs no GPU time: no budget there
            left = 1800 if args.dry else BUDGET_S - (time.time() - start)
            if left < 15:
                results[name] = {"rc": None, "seconds": 0, "result": None, "tail": "skipped: time budget spent"}
                print(f"{name}: skipped, the budget of {BUDGET_S} s is spent", flush=True)
                continue
            rc, text, secs = _run(cmd, env, int(min(left, 1800 if args.dry else TIMEOUT_S.get(name, 90))))
            res = [json.loads(l[7:]) for l in text.splitlines() if l.startswith("RESULT ")]
            results[name] = {"rc": rc, "seconds": secs, "result": res[0] if res else None,
                             "tail": None if res and rc == 0 else text[-2500:]}
            if "memcheck" in name:
                lines = [l for l in text.splitlines() if "Invalid" in l or "ERROR SUMMARY" in l or "Address" in l
                         or (" at " in l and ".py:" in l)]
                results[name]["sanitizer_lines"] = lines[:16]
                results[name]["confirmed"] = any("Invalid __global__" in l for l in lines)
            log.write(f"==== {name} (rc {rc}, {secs} s)\n$ {' '.join(cmd)}\n{text}\n")
            print(f"{name}: rc {rc}, {secs} s, {json.dumps(results[name]['result'], sort_keys=True)}"
                  + (f", memcheck confirmed: {results[name]['confirmed']}" if "memcheck" in name else ""), flush=True)
    print(f"total {time.time() - start:.1f} s; results in {out_dir}", flush=True)
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
