"""Branches that the programs of a chunk take differently run batched, each side masked to its programs
(record/divergence/branches.py): outputs equal torch's, and the whole trace (ops, seq numbers, lanes,
values), the value findings and the metrics equal those of one program at a time."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from helpers.batch import same_as_one_at_a_time


@triton.jit
def alternating(x_ptr, y_ptr, z_ptr, B: tl.constexpr):
    """Even programs scale and store to y; odd ones shift, store to z under a mask and read one more row."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    if pid % 2 == 0:
        out = x * 2.0
        tl.store(y_ptr + offs, out)
    else:
        nxt = tl.load(x_ptr + ((pid + 1) % 16) * B + tl.arange(0, B))
        out = x + nxt
        tl.store(z_ptr + offs, out, mask=tl.arange(0, B) < 5)
    tl.store(y_ptr + 16 * B + offs, out + 1.0)


def _alternating(w):
    x = torch.randn(16 * 8)
    y, z = torch.zeros(32 * 8), torch.zeros(16 * 8)
    w(alternating)[(16,)](x, y, z, B=8)
    xs = x.view(16, 8)
    out = torch.where(torch.arange(16)[:, None] % 2 == 0, xs * 2, xs + xs.roll(-1, 0))
    want_y = torch.cat([torch.where(torch.arange(16)[:, None] % 2 == 0, out, 0.0), out + 1]).reshape(-1)
    want_z = torch.where((torch.arange(16)[:, None] % 2 == 1) & (torch.arange(8) < 5), out, 0.0).reshape(-1)
    assert torch.equal(y, want_y) and torch.equal(z, want_z)
    return torch.cat([y, z])


@triton.jit
def _pick(v, flag):
    if flag > 0:
        r = tl.sqrt_rn(v)            # NaN for negative v: only the programs that take this side may report it
    elif flag < 0:
        r = v * -1.0
    else:
        r = v
    return r


@triton.jit
def flagged(x_ptr, flags_ptr, out_ptr, cnt_ptr, B: tl.constexpr):
    """A per-program flag read from memory picks the side (irregular pattern), in a helper with elif; no else
    in the kernel's own if; an atomic on the program's own counter inside a side."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    f = tl.load(flags_ptr + pid)
    v = _pick(tl.load(x_ptr + offs), f)
    scale = 1.0
    if f == 0:
        scale = 3.0
        tl.atomic_add(cnt_ptr + pid, 1)
    tl.store(out_ptr + offs, v * scale)


def _flagged(w):
    torch.manual_seed(1)
    flags = torch.randint(-1, 2, (32,), dtype=torch.int32)
    x = torch.randn(32 * 4).abs()
    x[flags.repeat_interleave(4) != 1] *= -1              # sqrt is only taken of non-negative values
    out, cnt = torch.empty(32 * 4), torch.zeros(32, dtype=torch.int32)
    w(flagged)[(32,)](x, flags, out, cnt, B=4)
    fl = flags.repeat_interleave(4)
    with np.errstate(invalid="ignore"):                  # torch's own sqrt is off by an ulp at times
        root = torch.from_numpy(np.sqrt(x.numpy()))
    want = torch.where(fl > 0, root, torch.where(fl < 0, -x, 3 * x))
    assert torch.equal(out, want) and torch.equal(cnt, (flags == 0).int())
    return torch.cat([out, cnt.float()])


@triton.jit
def in_loops(x_ptr, out_ptr, B: tl.constexpr):
    """A branch inside a loop whose trip count differs per program, and a loop inside a branch."""
    pid = tl.program_id(0)
    cols = tl.arange(0, B)
    acc = tl.zeros([B], dtype=tl.float32)
    for k in range(0, pid % 5):          # some programs make no trip: v is bound in the others only
        v = tl.load(x_ptr + k * B + cols)
        if (k + pid) % 3 == 0:
            acc += v
        else:
            acc = acc * 0.5 - v
    if pid % 2 == 1:
        for j in range(0, pid % 4):
            acc += tl.load(x_ptr + (j + 5) * B + cols) * j
    tl.store(out_ptr + pid * B + cols, acc)


def _in_loops(w):
    x = torch.randn(10 * 8)
    out = torch.empty(24 * 8)
    w(in_loops)[(24,)](x, out, B=8)
    xs = x.view(10, 8)
    for pid in range(24):                        # the same arithmetic, one program at a time, in float32
        acc = torch.zeros(8)
        for k in range(pid % 5):
            acc = acc + xs[k] if (k + pid) % 3 == 0 else acc * 0.5 - xs[k]
        if pid % 2 == 1:
            for j in range(pid % 4):
                acc = acc + xs[j + 5] * j
        assert torch.equal(out[pid * 8:(pid + 1) * 8], acc), pid
    return out


@triton.jit
def wraps_on_one_side(out_ptr, B: tl.constexpr):
    """Odd programs compute an int32 product that wraps but keep the other side's value: nothing wrapped
    reaches memory, so nothing is reported."""
    pid = tl.program_id(0)
    v = tl.full([B], 1 << 20, tl.int32) + pid
    w = v * 2
    if pid % 2 == 1:
        w = v * 4096                 # wraps: (1 << 20) * 4096 = 1 << 32
        w = v + pid
    tl.store(out_ptr + pid * B + tl.arange(0, B), w)


def _wraps(w):
    out = torch.empty(8 * 4, dtype=torch.int32)
    w(wraps_on_one_side)[(8,)](out, B=4)
    pid = torch.arange(8).repeat_interleave(4)
    v = (1 << 20) + pid
    assert torch.equal(out, torch.where(pid % 2 == 1, v + pid, v * 2).int())
    return out.float()


@triton.jit
def bound_on_one_side(x_ptr, out_ptr, B: tl.constexpr):
    """``extra`` exists only for odd programs (read under the same condition later): the chunk splits into
    runs (here of one program each), exactly."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    if pid % 2 == 1:
        extra = x * 3.0
        n = 2
    else:
        n = 1
    if pid % 2 == 1:
        x = x + extra
    tl.store(out_ptr + offs, x * n)


def _bound(w):
    x = torch.randn(8 * 4)
    out = torch.empty(8 * 4)
    w(bound_on_one_side)[(8,)](x, out, B=4)
    odd = (torch.arange(8) % 2 == 1).repeat_interleave(4)
    assert torch.equal(out, torch.where(odd, (x + x * 3) * 2, x))
    return out


@triton.jit
def head_and_tail(x_ptr, out_ptr, n_full, B: tl.constexpr):
    """Long runs of programs agree (the full blocks, then the tail): the chunk splits into the runs."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    if pid < n_full:
        v = tl.load(x_ptr + offs) + 1.0
    else:
        v = tl.load(x_ptr + offs, mask=offs < n_full * B + 3, other=-1.0)
    tl.store(out_ptr + offs, v)


def _head_tail(w):
    x = torch.randn(40 * 4)
    out = torch.empty(40 * 4)
    w(head_and_tail)[(40,)](x, out, 30, B=4)
    want = torch.cat([x[:120] + 1, x[120:123], torch.full((37,), -1.0)])
    assert torch.equal(out, want)
    return out


MASKED = [_alternating, _flagged, _in_loops, _wraps]
SPLIT = [_bound, _head_tail]


@pytest.mark.parametrize("run", MASKED + SPLIT, ids=lambda f: f.__name__[1:])
def test_divergent_branches_record_what_one_program_at_a_time_records(run):
    traces, rep = same_as_one_at_a_time(run)
    ex = traces[1].launches[0].meta["execution"]
    programs = traces[1].launches[0].recorded_programs
    if run in MASKED:                                  # both sides masked, the chunk whole
        assert ex["diverged_chunks"] == 0 and ex["batched_programs"] == programs and not ex["fallbacks"], ex
    else:                                              # split into runs of programs that agree
        assert ex["diverged_chunks"] >= 1, ex
    if run is _head_tail:
        assert ex["batched_programs"] == programs and not ex["fallbacks"], ex
    if run is _wraps:
        assert not rep[1]["findings"]                  # the wrapped value never reached memory


def test_a_side_with_return_is_left_alone():
    import ast
    from triton_trace.record.divergence import rewrite as looprewrite
    src = ("def k(p):\n    if p:\n        return\n    if p > 1:\n        x = 1\n    else:\n        x = 2\n")
    text = ast.unparse(looprewrite.transform(ast.parse(src)))
    assert "if p:\n        return" in text and looprewrite.IF + "(p > 1, assigned=('x',), live=(), has_else=True)" in text
