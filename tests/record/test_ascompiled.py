"""``numerics="compiled"`` (record/gpu/ascompiled.py): the trace computes ``a * b + c`` as the compiled kernel's
single ``fma.rn`` and reads fp32 ``tl.dot`` inputs as TF32 does. The references are computed here
independently (exact rationals, bit masks), and the contraction pattern is the one in the PTX Triton emits
for sm_90 from the same kernel, compiled on this machine."""
from __future__ import annotations

import os
import re
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import TraceUsageError

N = 512


@triton.jit
def contracted(a_ptr, b_ptr, c_ptr, d_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a, b = tl.load(a_ptr + r), tl.load(b_ptr + r)
    c, d = tl.load(c_ptr + r), tl.load(d_ptr + r)
    p = a * b
    tl.store(out_ptr + r, p + c)                   # fma(a, b, c)
    tl.store(out_ptr + N + r, p - d)               # fma(a, b, -d): the product has two uses, both fused
    tl.store(out_ptr + 2 * N + r, a * b + c * d)   # a*b is p again (more uses): c*d is the one fused
    tl.store(out_ptr + 3 * N + r, c - a * b)       # fma(-a, b, c)


def _round(x: Fraction, dtype) -> float:
    """The exact rational rounded to nearest-even in ``dtype``, by comparing the neighbours exactly."""
    f = dtype(float(x))
    best = None
    for cand in (np.nextafter(f, dtype(-np.inf)), f, np.nextafter(f, dtype(np.inf))):
        err = abs(Fraction(float(cand)) - x)
        even = int(np.asarray(cand).view({4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize])) % 2 == 0
        key = (err, not even)
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


def _fma(a, b, c, dtype=np.float32) -> np.ndarray:
    return np.array([_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), dtype)
                     for x, y, z in zip(a, b, c)], dtype=dtype)


def _inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(N, generator=g) * 3 for _ in range(4)]


def _run(numerics, inputs, **kw):
    out = torch.empty(4 * N)
    triton_trace.trace(contracted, numerics=numerics, **kw)[(1,)](*inputs, out, N)
    return out.numpy().reshape(4, N)


@pytest.mark.parametrize("batch", [True, False])
def test_a_product_added_is_one_fma_as_compiled(batch):
    a, b, c, d = (t.numpy() for t in _inputs())
    got = _run("compiled", _inputs(), batch=batch)
    p = (a * b).astype(np.float32)
    np.testing.assert_array_equal(got[0], _fma(a, b, c))
    np.testing.assert_array_equal(got[1], _fma(a, b, -d))
    np.testing.assert_array_equal(got[2], _fma(c, d, p))
    np.testing.assert_array_equal(got[3], _fma(-a, b, c))
    # the interpreter's own numerics round twice, and differ on some elements: the test can tell them apart
    plain = _run("interpreter", _inputs(), batch=batch)
    np.testing.assert_array_equal(plain[0], p + c)
    assert (plain != got).any(axis=1).all()


def test_the_launch_says_which_numerics_computed_it():
    triton_trace.reset()
    _run("compiled", _inputs())
    _run("interpreter", _inputs())
    first, second = triton_trace.current_trace().launches
    assert first.meta.get("numerics") == "compiled" and "numerics" not in second.meta
    report = triton_trace.analyze(triton_trace.current_trace())
    assert [d["numerics"] for d in report.to_dict()["launches"]] == ["compiled", "interpreter"]
    assert "launch 0: values computed as the compiled kernel does (numerics='compiled'" in report.summary()


def test_the_ptx_fuses_what_the_trace_fuses():
    """Triton compiles the kernel above for sm_90 here (no GPU needed): four fma.rn.f32 and the one product
    left unfused is a*b, the operand of the third store whose other operand c*d has fewer uses."""
    from triton_trace.compiled.toolchain import DeviceTensor, compile_jit
    args = {n: DeviceTensor(torch.float32, 1 << 20) for n in ("a_ptr", "b_ptr", "c_ptr", "d_ptr", "out_ptr")}
    ptx = compile_jit(contracted, {**args, "N": N}, {"num_warps": 4}, 90)["ptx"]
    body = [ln.split("//")[0] for ln in ptx.splitlines()]
    fmas = [ln for ln in body if re.search(r"\bfma\.rn\.f32\b", ln)]
    muls = [ln for ln in body if re.search(r"\bmul\.(rn\.)?f32\b", ln)]
    # each thread holds 4 elements: 4 fmas per store, and the 4 products left are a*b's, whose operands
    # are also an fma's multiplicands (p + c) while c*d's pairs appear only in fmas
    assert len(fmas) == 4 * len(muls) and len(muls) == 4, (len(fmas), len(muls))
    regs = lambda ln: re.findall(r"%r\d+", ln)  # noqa: E731
    mul_pairs = {frozenset(regs(ln)[1:3]) for ln in muls}
    fma_pairs = {frozenset(regs(ln)[1:3]) for ln in fmas}
    assert mul_pairs < fma_pairs


@pytest.mark.parametrize("how", ["launch", "environment"])
def test_without_fp_fusion_nothing_is_contracted(how, monkeypatch):
    """enable_fp_fusion=False (or TRITON_DEFAULT_FP_FUSION=0, Triton 3.10's coming default): the PTX has
    mul.f32 and add.f32, no fma.rn.f32, and the trace rounds the product and the sum each once."""
    from triton_trace.compiled.toolchain import DeviceTensor, compile_jit
    opts = {"num_warps": 4}
    if how == "launch":
        opts["enable_fp_fusion"] = False
    else:
        monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    args = {n: DeviceTensor(torch.float32, 1 << 20) for n in ("a_ptr", "b_ptr", "c_ptr", "d_ptr", "out_ptr")}
    ptx = compile_jit(contracted, {**args, "N": N}, opts, 90)["ptx"]
    assert not re.search(r"\bfma\.rn\.f32\b", ptx) and re.search(r"\bmul\.(rn\.)?f32\b", ptx)
    a, b, c, d = (t.numpy() for t in _inputs())
    out = torch.empty(4 * N)
    launch = {"enable_fp_fusion": False} if how == "launch" else {}
    triton_trace.trace(contracted, numerics="compiled")[(1,)](*_inputs(), out, N, **launch)
    got = out.numpy().reshape(4, N)
    np.testing.assert_array_equal(got[0], (a * b).astype(np.float32) + c)
    np.testing.assert_array_equal(got[1], (a * b).astype(np.float32) - d)
    assert (got[0] != _fma(a, b, c)).any()          # the fused result differs: the test can tell them apart


@triton.jit
def approximations(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x, y = tl.load(x_ptr + r), tl.load(y_ptr + r)
    tl.store(out_ptr + r, x / y)
    tl.store(out_ptr + N + r, tl.sqrt(x))
    tl.store(out_ptr + 2 * N + r, tl.rsqrt(x))
    tl.store(out_ptr + 3 * N + r, y / 2.081946849822998)      # 0x40053e9e, a constant divisor


def _sass(ptx: str, tmp_path) -> str:
    """The sm_90 machine code of a PTX text, from the ptxas Triton compiles sm_90 with and the cuobjdump it
    ships."""
    import subprocess

    import triton.backends.nvidia as nv
    from triton.backends.nvidia.compiler import get_ptxas
    tools = os.path.join(os.path.dirname(nv.__file__), "bin")
    src, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    src.write_text(ptx)
    try:
        subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-O3", str(src), "-o", str(cubin)],
                       check=True, capture_output=True, timeout=120)
        return subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", str(cubin)], check=True,
                              capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"Triton's ptxas/cuobjdump do not run here: {e}")


def test_the_compiled_kernel_runs_the_mufu_instructions_the_trace_emulates(tmp_path):
    """fp32 x / y is div.full.f32, tl.sqrt / tl.rsqrt the .ftz approximations (numerics/mufu.py emulates
    them), and a constant divisor's reciprocal is folded by ptxas to the correctly rounded one, which is
    not the MUFU's: an FMUL by rn(1/C), no MUFU.RCP for it."""
    from triton_trace.compiled.toolchain import DeviceTensor, compile_jit
    from triton_trace.numerics import mufu
    args = {n: DeviceTensor(torch.float32, 1 << 20) for n in ("x_ptr", "y_ptr", "out_ptr")}
    ptx = compile_jit(approximations, {**args, "N": N}, {"num_warps": 4}, 90)["ptx"]
    body = "\n".join(ln.split("//")[0] for ln in ptx.splitlines())
    per_thread = N // 128
    assert len(re.findall(r"\bsqrt\.approx\.ftz\.f32\b", body)) == per_thread
    assert len(re.findall(r"\brsqrt\.approx\.ftz\.f32\b", body)) == per_thread
    assert len(re.findall(r"\bdiv\.full\.f32\b", body)) >= per_thread        # 3.6: the constant's too
    assert not re.search(r"\bsqrt\.rn\b|\bdiv\.rn\b", body)
    sass = _sass(ptx, tmp_path)
    c = np.float32(2.081946849822998)
    rn, hw = np.float32(1 / np.float64(c)), mufu.rcp_approx(c)
    assert rn != hw
    assert len(re.findall(r"MUFU\.RCP\b", sass)) == per_thread                  # x / y only
    imm = [np.float32(float(v)) for v in re.findall(r"FMUL\S* R\d+, R\d+, ([-0-9.e+]+)", sass)]
    assert rn in imm and hw not in imm, imm
    assert len(re.findall(r"MUFU\.SQRT\b", sass)) == per_thread and len(re.findall(r"MUFU\.RSQ\b", sass)) == per_thread


@triton.jit
def fp32_dot(a_ptr, b_ptr, out_ptr, M: tl.constexpr, PRECISION: tl.constexpr):
    r = tl.arange(0, M)
    a = tl.load(a_ptr + r[:, None] * M + r[None, :])
    b = tl.load(b_ptr + r[:, None] * M + r[None, :])
    tl.store(out_ptr + r[:, None] * M + r[None, :], tl.dot(a, b, input_precision=PRECISION))


def test_fp32_dot_inputs_are_read_as_tf32_only_at_tf32():
    g = torch.Generator().manual_seed(0)
    m = 16
    # small integers times (1 + 2^-12): every product and partial sum of K = 16 is exact in fp32 (at most 24
    # significant bits), so the accumulation order cannot matter; TF32 keeps 11 bits and drops the 2^-12
    a = (torch.randint(-8, 9, (m, m), generator=g).float() * (1 + 2.0 ** -12)).contiguous()
    b = torch.randint(-8, 9, (m, m), generator=g).float()
    cut = lambda t: (t.numpy().view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    tf32, ieee = cut(a).astype(np.float64) @ cut(b).astype(np.float64), a.double().numpy() @ b.double().numpy()
    assert (tf32 != ieee).mean() > 0.5
    for precision, want in (("tf32", tf32), ("ieee", ieee)):
        out = torch.empty(m, m)
        triton_trace.trace(fp32_dot, numerics="compiled")[(1,)](a, b, out, m, precision)
        np.testing.assert_array_equal(out.numpy(), want.astype(np.float32), err_msg=precision)
    plain = torch.empty(m, m)
    triton_trace.trace(fp32_dot)[(1,)](a, b, plain, m, "tf32")
    np.testing.assert_array_equal(plain.numpy(), (a.double().numpy() @ b.double().numpy()).astype(np.float32))


def test_an_unknown_numerics_is_refused_with_the_choices():
    with pytest.raises(TraceUsageError, match="numerics=.*'interpreter', 'compiled'.*'gpu'"):
        triton_trace.trace(contracted, numerics="gpu")
