"""Two places where the interpreter and the tracer disagreed with compiled code (issue 40, "Bring your own
suite"): a ``for`` loop's variable is a tensor on a GPU, so ``i.to(tl.int64)`` compiles (flash-linear-
attention's ``i_t.to(tl.int64)``), where the interpreter gave a Python int (record/divergence/induction.py);
and a float stored into a bfloat16 tensor was checked as a conversion to uint16, the bfloat16 bits, so
-2.109375 "became 49159" (0xC007) in a false ``overflow`` finding (record/checks/overflow_ops.py), while a
real bfloat16 overflow to Inf went unreported. Expected values come from numpy and torch, not the tracer."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace


# --------------------------------------------------------------------------------------------------------
# 1. loop variables answer as the compiled loop's scalar tensor
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _row_sum(x_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.int64)
    for i in range(n):                     # a helper's loop, runtime bound
        acc += i.to(tl.int64)
    return acc + tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.int64)


@triton.jit
def loop_vars(x_ptr, out_ptr, n, lens_ptr, N: tl.constexpr, BT: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.int64) + tl.num_programs(0).to(tl.int64) * 1000
    for i_t in range(N):                                   # constexpr bound: int32
        tl.static_assert(i_t.dtype == tl.int32)
        acc += i_t.to(tl.int64) * pid + (i_t * BT).to(tl.int64)
    for i in range(n):                                     # runtime bound (an int32 argument)
        acc += i.to(tl.int64) * 3
    for i in tl.range(0, n, 2, num_stages=2):              # the masked-loop rewrite's path
        acc += i.to(tl.int64)
    for i in tl.range(1, n, step=3):                       # a keyword step: left as it is, typed
        acc += (-i).to(tl.int64)
    for i in range(0, tl.load(lens_ptr + pid)):            # a bound that differs per program (masked trips)
        acc += i.to(tl.int64) * 7
    for j in tl.static_range(2):                           # a constexpr on a GPU: stays an int
        acc += (j + 1) * 10000
    acc += _row_sum(x_ptr, n, BLOCK)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


def _expected_loop_vars(x, n, lens, N, BT, grid):
    rows = []
    for pid in range(grid):
        v = grid * 1000
        v += sum(i * pid + i * BT for i in range(N))
        v += sum(3 * i for i in range(n)) + sum(range(0, n, 2)) - sum(range(1, n, 3))
        v += sum(7 * i for i in range(int(lens[pid])))
        v += 10000 + 20000 + sum(range(n))
        rows.append(v + x.to(torch.int64))
    return torch.cat(rows)


@pytest.mark.parametrize("batch", [True, False])
def test_loop_variables_take_tensor_methods_when_traced(batch):
    grid, BLOCK, n = 6, 4, 5
    x = torch.arange(BLOCK, dtype=torch.int32) * 100
    lens = torch.tensor([0, 3, 1, 4, 4, 2], dtype=torch.int32)
    out = torch.empty(grid * BLOCK, dtype=torch.int64)
    kernel = triton_trace.trace(batch=batch)(loop_vars)
    kernel[(grid,)](x, out, n, lens, N=3, BT=16, BLOCK=BLOCK)
    assert torch.equal(out, _expected_loop_vars(x, n, lens, 3, 16, grid))
    launch = triton_trace.current_trace().launches[0]
    assert launch.completed and launch.recorded_programs == grid
    assert not triton_trace.analyze(triton_trace.current_trace()).findings


def test_loop_variables_take_tensor_methods_untraced():
    """The path ``pytest --tt-cuda`` runs fixtures' launches on: the interpreter, nothing kept."""
    grid, BLOCK, n = 3, 4, 4
    x = torch.arange(BLOCK, dtype=torch.int32)
    lens = torch.tensor([2, 0, 5], dtype=torch.int32)
    out = torch.empty(grid * BLOCK, dtype=torch.int64)
    undecorated = triton.jit(loop_vars.fn)          # (trace() marks the kernel object it decorates)
    with triton_trace.trace_all(kernels=()):
        undecorated[(grid,)](x, out, n, lens, N=2, BT=8, BLOCK=BLOCK)
    assert torch.equal(out, _expected_loop_vars(x, n, lens, 2, 8, grid))
    assert not triton_trace.current_trace().launches


@triton.jit
def wide_loop(out_ptr, start, T: tl.constexpr):
    """``start`` past int32 is an int64 argument: the loop variable is int64, and narrowing wraps."""
    for i in range(start, start + T):
        tl.static_assert(i.dtype == tl.int64)
        tl.store(out_ptr + (i - start), i.to(tl.int64))
        tl.store(out_ptr + T + (i - start), i.to(tl.int8).to(tl.int64))


def test_loop_variable_is_exact_past_int32():
    start, T = 2**31 + 250, 8
    out = torch.zeros(2 * T, dtype=torch.int64)
    triton_trace.trace(wide_loop)[(1,)](out, start, T=T)
    wide = torch.arange(start, start + T, dtype=torch.int64)
    assert torch.equal(out[:T], wide)
    assert torch.equal(out[T:], torch.from_numpy(wide.numpy().astype(np.int8).astype(np.int64)))


@triton.jit
def persistent(out_ptr, n_tiles, NUM: tl.constexpr):
    pid = tl.program_id(0)
    for tile in tl.range(pid, n_tiles, NUM):       # a start that differs per program: a tensor already
        tl.store(out_ptr + tile, tile.to(tl.int64) * 2 + pid.to(tl.int64))


def test_persistent_loop_variable():
    out = torch.full((11,), -1, dtype=torch.int64)
    triton_trace.trace(persistent)[(4,)](out, 11, NUM=4)
    assert torch.equal(out, torch.arange(11) * 2 + torch.arange(11) % 4)


def test_induction_variable_arithmetic_stays_typed():
    from triton_trace.record.divergence import induction
    i = induction.of(7, tl.int32)
    assert i == 7 and isinstance(i, int) and i.dtype == tl.int32
    for v in (i * 3, 3 * i, i + 1, 1 - i, -i, i // 2, i % 4, i << 2):
        assert isinstance(v, induction.InductionVar) and v.dtype == tl.int32
    assert type(i / 2) is float and type(i * 1.5) is float and (i < 8) is True
    assert induction.of(1, tl.int32) + induction.of(2, tl.int64) == 3
    assert (induction.of(1, tl.int32) + induction.of(2, tl.int64)).dtype == tl.int64
    assert induction.loop_type((0, 2**31 + 1, 1)) == tl.uint32       # a constant bound, as the compiler types it
    assert induction.loop_type((0, 1.5, 1)) is None
    with pytest.raises(AttributeError):
        i.__array_interface__                                        # numpy's probes are not forwarded


# --------------------------------------------------------------------------------------------------------
# 2. low-precision stores are checked by value
# --------------------------------------------------------------------------------------------------------
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def _copy(src: torch.Tensor, dtype, batch=True):
    triton_trace.reset()
    out = torch.zeros(src.numel(), dtype=dtype)
    triton_trace.trace(batch=batch)(copy_kernel)[(triton.cdiv(src.numel(), 16),)](src, out, src.numel(), BLOCK=16)
    return out, triton_trace.analyze(triton_trace.current_trace()).findings


def _values(dtype, big: float, n: int = 40) -> torch.Tensor:
    x = torch.linspace(-300.0, 300.0, n, dtype=torch.float64) * 1.0078125
    x[::7] = -2.109375                             # 0xC007 in bfloat16: the value the old check misread
    x[3], x[5] = big, -big                       # both in program 0 (a finding names one program)
    return x.to(dtype)


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("dst", [torch.bfloat16, torch.float16])
def test_in_range_stores_have_no_finding(dst, batch):
    limit = torch.finfo(dst).max
    src = _values(torch.float32, limit * 0.99)
    out, findings = _copy(src, dst, batch)
    assert torch.isfinite(src.to(dst)).all()                         # torch: every value fits
    assert torch.equal(out, src.to(dst)) and not findings


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("src_dtype,dst,big", [
    (torch.float32, torch.bfloat16, 3.4e38), (torch.float64, torch.bfloat16, 1e39),
    (torch.float32, torch.float16, 1e5), (torch.float64, torch.float16, 1e39)])
def test_overflowing_stores_are_found(src_dtype, dst, big, batch):
    src = _values(src_dtype, big)
    expect = torch.isfinite(src) & ~torch.isfinite(src.to(dst))      # torch: finite in, infinite out
    assert expect.sum() == 2
    out, findings = _copy(src, dst, batch)
    assert torch.equal(out, src.to(dst))
    assert [f.kind for f in findings] == ["overflow"]
    f = findings[0]
    assert f.program == (0, 0, 0) and list(f.offsets) == expect.nonzero().flatten().tolist() and f.count == 2
    name = "bf16" if dst == torch.bfloat16 else "fp16"
    assert f"in conversion to {name} from finite operands ({float(src[3])!r}) -> inf" in f.message, f.message


@triton.jit
def bf16_math(x_ptr, out_ptr, ints_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)               # bfloat16
    tl.store(out_ptr + offs, x * x, mask=m)                      # bfloat16 arithmetic
    tl.store(ints_ptr + offs, x.to(tl.int32), mask=m)            # bfloat16 to int32


def test_bfloat16_arithmetic_and_int_conversion_by_value():
    ok = torch.tensor([-2.109375, 1.5, -300.0, 1e4], dtype=torch.bfloat16)
    out, ints = torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4, dtype=torch.int32)
    kernel = triton_trace.trace(bf16_math)
    kernel[(1,)](ok, out, ints, 4, BLOCK=4)
    assert torch.equal(out, ok * ok) and torch.equal(ints, ok.to(torch.int32))
    assert not triton_trace.analyze(triton_trace.current_trace()).findings

    triton_trace.reset()
    bad = torch.tensor([1.0, 2e19, 3e38, 4.0], dtype=torch.bfloat16)     # squares overflow; 2e19, 3e38 saturate int32
    kernel[(1,)](bad, out, ints, 4, BLOCK=4)
    assert torch.equal(out, bad * bad)
    found = {f.kind: f for f in triton_trace.analyze(triton_trace.current_trace()).findings}
    assert set(found) == {"nonfinite", "overflow"}, found
    assert "in multiply from finite operands" in found["nonfinite"].message
    assert list(found["nonfinite"].offsets) == (~torch.isfinite(bad * bad)).nonzero().flatten().tolist()
    assert "conversion to int32 out of range" in found["overflow"].message


@triton.jit
def _dtype_max(dtype):
    # as library helpers write it (FlagGems' utils/limits.py): in compiled code a dtype argument is a
    # tl.constexpr, whose .value is the dtype
    dtype_ = dtype.value
    if dtype_.is_floating():
        return float("inf")
    return 2 ** (dtype_.int_bitwidth - 1) - 1


@triton.jit
def _fill_with_dtype_max(out_ptr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), _dtype_max(DTYPE), DTYPE))


@pytest.mark.parametrize("dtype,want", [(torch.int32, 2**31 - 1), (torch.int16, 2**15 - 1), (torch.float32, float("inf"))])
def test_a_dtype_passed_to_a_helper_has_a_constexpr_value(dtype, want):
    from triton_trace import trace
    tl_dtype = {torch.int32: tl.int32, torch.int16: tl.int16, torch.float32: tl.float32}[dtype]
    out = torch.zeros(16, dtype=dtype)
    trace(_fill_with_dtype_max)[(1,)](out, DTYPE=tl_dtype, BLOCK=16)
    assert torch.equal(out, torch.full((16,), want, dtype=dtype))
    assert not hasattr(tl.float32, "value")            # put back after the launch


@triton.jit
def _bf16_scatter_add(out_ptr, idx_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(out_ptr + tl.load(idx_ptr + offs, mask=m, other=0), tl.load(src_ptr + offs, mask=m, other=0),
                  mask=m, sem="relaxed")


def test_bfloat16_atomic_add_runs_and_rounds_each_add():
    """The interpreter's C++ atomics have no bf16 (FlagGems' bf16 scatter_add stopped with "Unsupported
    data type"); traced, each add rounds to bf16 in lane order, as sequential bf16 adds in torch do."""
    from triton_trace import trace
    g = torch.Generator().manual_seed(0)
    n = 300
    idx = torch.randint(0, 7, (n,), generator=g, dtype=torch.int32)
    src = torch.randn(n, generator=g).to(torch.bfloat16)
    out = torch.randn(7, generator=g).to(torch.bfloat16)
    want = out.clone()
    for i in range(n):                         # one program's lanes on one address add in lane order
        want[idx[i]] = (want[idx[i]].float() + src[i].float()).to(torch.bfloat16)
    trace(_bf16_scatter_add)[(triton.cdiv(n, 512),)](out, idx, src, n, BLOCK=512)
    assert torch.equal(out, want)


@triton.jit
def _atomic_broadcast(out_ptr, x_ptr, N: tl.constexpr, H: tl.constexpr):
    rows = tl.arange(0, H)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + cols)                                   # [N], broadcast against the [H, N] pointers
    tl.atomic_add(out_ptr + rows[:, None] * N + cols[None, :], x[None, :], mask=cols[None, :] < N)


def test_an_atomic_whose_operands_broadcast_runs_under_every_check():
    """Broadcasting hands the builder a ``tl.tuple`` shape, whose ``__getattr__`` raises ValueError for a
    missing name: the checks' tags are read without getattr (Liger's mhc backward stopped here)."""
    from triton_trace import trace
    x = torch.randn(8)
    out = torch.zeros(4, 8)
    trace(_atomic_broadcast)[(3,)](out, x, N=8, H=4)
    assert torch.allclose(out, 3 * x.expand(4, 8))


# unsloth's kernels call ``triton_cast = tl.cast`` (kernels/utils.py): a module-level alias of a language
# builtin, which compiles (the code generator resolves the builtin by identity) but which Triton's
# interpreter leaves unpatched ("Did you forget to add @triton.jit?"); ``from triton.language import where``
# is the same defect
_alias_cast = tl.cast
_alias_where = tl.where


@triton.jit
def _aliased_builtins(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    wide = _alias_cast(x, tl.float64) * 3
    tl.store(y_ptr + offs, _alias_where(x > 0, _alias_cast(wide, tl.float32), -x), mask=m)


@pytest.mark.parametrize("batch", [False, True])
def test_a_module_level_alias_of_a_builtin_runs(batch):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    y = torch.empty_like(x)
    triton_trace.reset()
    kernel = triton_trace.trace(batch=batch)(_aliased_builtins)
    kernel[(triton.cdiv(1000, 256),)](x, y, 1000, BLOCK=256)
    torch.testing.assert_close(y, torch.where(x > 0, (x.double() * 3).float(), -x), rtol=0, atol=0)
    assert not triton_trace.analyze(triton_trace.current_trace()).findings
    assert _alias_cast is tl.cast and _alias_where is tl.where      # restored after the launch


# --------------------------------------------------------------------------------------------------------
# 3. the standard library's tensor methods (x.sum(), x.max()) bind their tensor, as compiled code does
# --------------------------------------------------------------------------------------------------------
@triton.jit
def member_methods(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr + 0, x.sum())
    tl.store(out_ptr + 1, x.max())
    tl.store(out_ptr + 2, x.abs().sum(axis=0))
    tl.store(out_ptr + 3, tl.sum(x) - x.sum())


def test_tensor_member_methods_bind_their_tensor():
    # Triton's test_tensor_member: imported without TRITON_INTERPRET (the suite mode), ``x.sum`` is the
    # JITFunction on the tensor class and nothing bound ``x``: "sum() missing 1 required positional argument"
    x = torch.tensor([3, -7, 5, 2, -1, 9, -4, 0], dtype=torch.int32)
    out = torch.zeros(4, dtype=torch.int32)
    triton_trace.trace(member_methods)[(1,)](x, out, BLOCK=8)
    xs = x.numpy().astype(np.int64)
    assert out.tolist() == [xs.sum(), xs.max(), np.abs(xs).sum(), 0]


# --------------------------------------------------------------------------------------------------------
# 4. closures, tl.map_elementwise and tl.extra.cuda's builtins, as Triton's own test_core uses them
# --------------------------------------------------------------------------------------------------------
def _local_kernels(offset):
    # helpers defined in a function: the kernel reads them (and ``offset``) from its closure; the local
    # ``divmod`` must not become Python's builtin
    @triton.jit
    def divmod(a, b):
        return a // b, a % b

    @triton.jit
    def sign_of_difference(x, y):
        if x < y:
            return -1
        elif x == y:
            return 0
        else:
            return 1

    @triton.jit
    def kernel(X, Y, Q, R, S, P, BLOCK: tl.constexpr):
        x = tl.load(X + tl.arange(0, BLOCK))
        y = tl.load(Y + tl.arange(0, BLOCK))
        q, r = tl.map_elementwise(divmod, x, y)
        tl.store(Q + tl.arange(0, BLOCK), q + offset)
        tl.store(R + tl.arange(0, BLOCK), r)
        tl.store(S + tl.arange(0, BLOCK), tl.map_elementwise(sign_of_difference, x, y))
        a, c = tl.map_elementwise(_divmod_packed, x, y, pack=2)      # pack values of each result
        tl.store(P + tl.arange(0, BLOCK), a * 1000 + c)
    return kernel


@triton.jit
def _divmod_packed(a0, a1, b0, b1):
    return a0 // b0, a1 // b1, a0 % b0, a1 % b1


@pytest.mark.skipif(not hasattr(tl, "map_elementwise"), reason="tl.map_elementwise is Triton >= 3.5")
@pytest.mark.parametrize("programs", [1, 3])
def test_closures_and_map_elementwise_follow_the_compiler(programs):
    g = torch.Generator().manual_seed(5)
    x = torch.randint(1, 60, (32,), generator=g, dtype=torch.int32)
    y = torch.randint(1, 60, (32,), generator=g, dtype=torch.int32)
    q, r, s, p = (torch.zeros_like(x) for _ in range(4))
    triton_trace.trace(_local_kernels(7))[(programs,)](x, y, q, r, s, p, BLOCK=32)
    xs, ys = x.numpy(), y.numpy()
    assert q.numpy().tolist() == (xs // ys + 7).tolist()
    assert r.numpy().tolist() == (xs % ys).tolist()
    assert s.numpy().tolist() == np.sign(xs - ys).tolist()
    assert p.numpy().tolist() == ((xs // ys) * 1000 + xs % ys).tolist()


@triton.jit
def cuda_extras(out_ptr, timer_ptr, SMID: tl.constexpr):
    pid = tl.program_id(0)
    n: tl.constexpr = tl.extra.cuda.num_threads()
    tl.store(out_ptr + pid * 3, n)
    tl.store(out_ptr + pid * 3 + 1, tl.extra.cuda.num_warps())
    tl.store(out_ptr + pid * 3 + 2, SMID())
    tl.store(timer_ptr + pid, tl.extra.cuda.globaltimer())


@pytest.mark.parametrize("warps", [2, 8])
def test_cuda_extras_read_the_launch(warps):
    out = torch.zeros(5 * 3, dtype=torch.int32)
    timer = torch.zeros(5, dtype=torch.int64)
    before = time.monotonic_ns()
    triton_trace.trace(cuda_extras)[(5,)](out, timer, tl.extra.cuda.smid, num_warps=warps)
    rows = out.reshape(5, 3).numpy()
    assert (rows[:, 0] == 32 * warps).all() and (rows[:, 1] == warps).all()
    assert rows[:, 2].tolist() == [0, 1, 2, 3, 4]          # every program resident at once, one SM each
    assert (timer.numpy() >= before).all() and (timer.numpy() <= time.monotonic_ns()).all()


@triton.jit
def _smid_kernel(out_ptr):
    tl.store(out_ptr + tl.program_id(0), tl.extra.cuda.smid())


def test_a_routed_launch_answers_asm_with_the_compilers_ptx():
    # Triton's test_smid asserts ``h.asm["ptx"].count("%smid") == 1`` on what the launch returned
    out = torch.full((4,), -1, dtype=torch.int32)
    with triton_trace.trace_all():
        h = _smid_kernel[(4,)](out)
    assert out.tolist() == [0, 1, 2, 3]
    assert h.asm["ptx"].count("%smid") == 1 and "tt.store" in h.asm["ttir"]


# --------------------------------------------------------------------------------------------------------
# a scalar comparison combined with a block one: the interpreter tagged comparisons with their operands'
# type, so the scalar's True was splat as 1.0 and numpy refused the xor (FlagGems' floor division by a scalar)
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _signs_differ(x_ptr, y, y_ptr, out_ptr, out2_ptr, n, B: tl.constexpr):
    o = tl.arange(0, B)
    m = o < n
    x = tl.load(x_ptr + o, mask=m).to(tl.float32)
    tl.store(out_ptr + o, ((x < 0) ^ (y.to(tl.float32) < 0)).to(tl.int32), mask=m)
    tl.store(out2_ptr + o, ((x > 1) | (tl.load(y_ptr) >= 0)).to(tl.int32), mask=m)


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("y", [-0.5, 2.0])
def test_a_scalar_comparison_broadcasts_as_a_boolean(batch, y):
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0, 0.5])
    out, out2 = torch.empty(5, dtype=torch.int32), torch.empty(5, dtype=torch.int32)
    triton_trace.trace(_signs_differ, batch=batch)[(2,)](x, y, torch.tensor([y]), out, out2, 5, B=8)
    assert out.tolist() == ((x < 0) ^ (y < 0)).int().tolist()
    assert out2.tolist() == ((x > 1) | (y >= 0)).int().tolist()
