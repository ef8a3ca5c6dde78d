"""The defects triton_trace found in public kernels (benchmarks/realbugs/REALBUGS.md), in kernels of our own:
each buggy kernel gets its finding, its fixed twin gets none, and both are compared with torch."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import triton_trace
from kernels import realbug_kernels as K


def _findings():
    return triton_trace.analyze(triton_trace.current_trace()).findings


def _traced(kernel, **kwargs):
    return triton_trace.trace(**kwargs)(kernel)


# ---------------------------------------------------------------- dropped blocks (Liger AttnRes, N > 32)

def _depth_inputs(N, R=3, D=20):
    torch.manual_seed(0)
    return torch.randn(N, R, D), torch.randn(N), torch.randn(R, D)


def test_blocks_past_the_cap_leave_dx_unwritten_and_out_wrong():
    x, w, g = _depth_inputs(11)
    out, dx = K.depth_mix(_traced(K.depth_mix_capped, outputs=("out_ptr", "dx_ptr")), x, w, g, cap=8)
    found = [f for f in _findings() if f.kind == "unwritten_output"]
    assert [f.tensor for f in found] == ["dx_ptr"]
    assert found[0].count == 3 * 3 * 20                      # blocks 8, 9, 10: every row, every column
    assert not torch.allclose(out, (w[:, None, None] * x).sum(0), atol=1e-5)
    assert torch.allclose(out, (w[:8, None, None] * x[:8]).sum(0), atol=1e-5)   # what it computed: 8 blocks


def test_fixed_depth_mix_visits_every_block():
    x, w, g = _depth_inputs(11)
    out, dx = K.depth_mix(_traced(K.depth_mix_fixed, outputs=("out_ptr", "dx_ptr")), x, w, g, cap=8)
    assert _findings() == ()
    assert torch.allclose(out, (w[:, None, None] * x).sum(0), atol=1e-5)
    assert torch.equal(dx, w[:, None, None] * g[None])


def test_under_the_cap_both_agree_and_nothing_is_found():
    x, w, g = _depth_inputs(5)
    out, dx = K.depth_mix(_traced(K.depth_mix_capped, outputs=("out_ptr", "dx_ptr")), x, w, g, cap=8)
    assert _findings() == ()
    assert torch.equal(dx, w[:, None, None] * g[None])


# ---------------------------------------------------------------- int32 block offset (Liger AttnRes at scale)

# (N - 1) * n_rows * D == 2**31 exactly: block 8's offset wraps to -2**31. x is int8 and never filled past row
# 0 of each block, so its 2.4 GB are address space only; one program (row 0) runs.
N32, ROWS32, D32 = 9, 1 << 18, 1024


@pytest.fixture(scope="module")
def big_stack():
    try:
        x = torch.empty(N32, ROWS32, D32, dtype=torch.int8)
    except RuntimeError as e:                   # an allocator that refuses 2.4 GB of address space
        pytest.skip(f"cannot reserve {N32 * ROWS32 * D32 >> 20} MiB of address space: {e}")
    x[:, 0, :] = torch.randint(-100, 100, (N32, D32), dtype=torch.int8)
    return x


def _depth_sum(kernel, x):
    out = torch.zeros(ROWS32, D32, dtype=torch.float32)
    kernel[(1,)](x, out, N32, ROWS32, D32, MAX_BLOCKS=16, BLOCK_D=D32)
    return out[0]


def test_int32_block_offset_wraps_at_two_to_the_31(big_stack):
    _depth_sum(_traced(K.depth_sum_int32), big_stack)
    found = _findings()
    overflow = [f for f in found if f.kind == "overflow"]
    oob = [f for f in found if f.kind == "out_of_bounds"]
    assert overflow and oob
    wrapped = (N32 - 1) * ROWS32 * D32 - (1 << 32)          # -2**31: computed here, not by the tool
    assert min(oob[0].offsets) == wrapped
    assert oob[0].count == D32                              # the 1024 lanes of block 8's load


def test_int64_block_offset_reads_the_right_rows(big_stack):
    out = _depth_sum(_traced(K.depth_sum_int64), big_stack)
    assert _findings() == ()
    assert torch.equal(out, big_stack[:, 0, :].float().sum(0))


# ---------------------------------------------------------------- one-pass variance (Liger GroupNorm)

def _constant_groups():
    return torch.full((4, 1000), 100.3)        # E[x^2] - E[x]^2 rounds to about -1e-3 in float32


def test_one_pass_variance_stores_nan_and_is_found():
    x = _constant_groups()
    y = K.group_norm(_traced(K.norm_onepass), x, rsqrt=False)
    ref = torch.nn.functional.group_norm(x[None], 4)[0]
    assert torch.isnan(y).all() and torch.equal(ref, torch.zeros_like(ref))
    found = [f for f in _findings() if f.kind == "nonfinite"]
    assert len(found) == 1 and found[0].tensor == "y_ptr"


def test_one_pass_variance_through_rsqrt_is_found():
    """tl.rsqrt is a builder method of its own (create_rsqrt), hooked by the non-finite check: the NaN is
    born there, from the negative variance of a constant group."""
    x = _constant_groups()
    y = K.group_norm(_traced(K.norm_onepass), x, rsqrt=True)
    assert torch.isnan(y).all()
    assert [f.kind for f in _findings()] == ["nonfinite"]


@pytest.mark.parametrize("rsqrt", [False, True])
def test_two_pass_variance_matches_torch(rsqrt):
    x = torch.cat([_constant_groups(), 100.3 + 1e-3 * torch.randn(4, 1000, generator=torch.Generator().manual_seed(0))])
    y = K.group_norm(_traced(K.norm_twopass), x, rsqrt=rsqrt)
    assert _findings() == ()
    ref = torch.nn.functional.group_norm(x.double()[None], 8)[0].float()
    assert torch.allclose(y, ref, atol=2e-2)


# ---------------------------------------------------------------- overlapping row tiles (fla layer norm bwd)

def test_tile_wider_than_owned_rows_races():
    x = torch.randn(50, 24)
    y = K.rows_double(_traced(K.rows_overlap), x, BS=1, BT=16)
    assert torch.equal(y, 2 * x)                           # benign: every writer stores the same value
    races = [f for f in _findings() if f.kind == "race"]
    assert races and {f.tensor for f in races} == {"y_ptr"}
    # row t is stored by programs max(0, t-15)..t: rows 1..49 have 2+ writers (computed here, not by the tool)
    writers = np.array([min(t, 15) + 1 for t in range(50)])
    assert (writers > 1).sum() == 49


def test_tile_masked_to_owned_rows_has_no_race():
    x = torch.randn(50, 24)
    y = K.rows_double(_traced(K.rows_owned), x, BS=1, BT=16)
    assert torch.equal(y, 2 * x)
    assert _findings() == ()


# ---------------------------------------------------------------- a false finding (GLA's intra-chunk A)

def _decreasing_gates():
    return -torch.arange(16, dtype=torch.float32) * 20.0        # g[i] - g[j] up to 300: exp2 overflows


def test_triangle_final_values_are_finite():
    g = _decreasing_gates()
    a = K.triangle(_traced(K.triangle_overwritten), g)
    ref = torch.tril(torch.exp2(g[:, None] - g[None, :]))
    assert torch.isfinite(a).all() and torch.equal(a, ref)


def test_triangle_overwritten_by_the_same_program_is_not_a_finding():
    """An inf that the same program overwrites with 0 before it ends never stays in memory: no finding."""
    K.triangle(_traced(K.triangle_overwritten), _decreasing_gates())
    assert _findings() == ()


def test_infs_the_program_leaves_in_memory_are_still_found():
    """The twin: the zeroing store misses the right half, so exactly the infs there stay; the finding
    counts them (numpy's float32 exp2 over the same differences, computed here)."""
    g = _decreasing_gates()
    a = K.triangle(_traced(K.triangle_half_zeroed), g)
    d = (g[:, None] - g[None, :]).numpy()
    j = np.arange(16)[None, :].repeat(16, 0)
    stays = np.isinf(np.exp2(d.astype(np.float32))) & (j >= 8)
    assert int(torch.isinf(a).sum()) == int(stays.sum()) > 0
    found = [f for f in _findings() if f.kind == "nonfinite"]
    assert len(found) == 1 and found[0].extent["poisoned"]["values"] == int(stays.sum())


# ---------------------------------------------------------------- softcapped logsumexp over padding (unsloth)

CAP, V = 30.0, 1000            # BLOCK 1024: 24 lanes past the vocabulary


def _padded_message_number(f, before, after=" "):
    return float(f.message.split(before)[1].split(after)[0].rstrip(")").rstrip(","))


def _softcap_rows():
    """Row 0: every logit far below -CAP (capped to -CAP, as the padding is); row 1: logits near -CAP;
    row 2: ordinary logits. Labels: 0, 5, 999."""
    z = torch.full((3, V), -1e4)
    z[0, 0] = -1e4 + 1
    z[1] = -60.0 + torch.randn(V, generator=torch.Generator().manual_seed(0))
    z[2] = 3.0 * torch.randn(V, generator=torch.Generator().manual_seed(1))
    return z, torch.tensor([0, 5, V - 1], dtype=torch.int32)


def _softcap_references(z, labels):
    """(what a GPU computes with the padded lanes at -CAP, the correct value): lse and loss per row."""
    capped = CAP * torch.tanh(z / CAP)
    npad = 1024 - V
    with_pad = torch.cat([capped, torch.full((z.shape[0], npad), -CAP)], dim=1)
    picked = capped.gather(1, labels.long()[:, None])[:, 0]
    gpu, right = torch.logsumexp(with_pad, 1), torch.logsumexp(capped, 1)
    return (gpu, gpu - picked), (right, right - picked)


@pytest.mark.parametrize("batch", [True, False])
def test_softcap_turns_inf_padding_into_counted_lanes(batch):
    from helpers.source import marked_line
    z, labels = _softcap_rows()
    z_before = z.clone()
    loss, lse = K.softcap_cross_entropy(_traced(K.softcap_lse_padded, batch=batch), z, labels, CAP)
    # the launch only reads z (a reference once came out different after it: name the elements if it wrote)
    changed = torch.nonzero(z != z_before).tolist()
    assert not changed, f"the traced launch changed its input z at {changed[:8]}: {z[z != z_before][:8].tolist()}"
    found = _findings()
    assert [f.kind for f in found] == ["padded_reduction"], [f.message for f in found]   # the sum, not the max
    f = found[0]
    assert (f.program, f.line) == ((0, 0, 0), marked_line(K.softcap_lse_padded)) and "tl.sum" in f.message
    assert "other=-inf" in f.message and f.count == 3 * 24 and f.extent["programs"]["count"] == 3
    # numpy, independently: the padded lanes hold CAP * tanh(-inf) = -CAP; the max (over real lanes, which
    # never go below -CAP) is what exp is shifted by; row 0's contribution is 24 * exp(0)
    zn = z.numpy().astype(np.float64)
    capped = CAP * np.tanh(zn / CAP)
    top = np.maximum(capped.max(axis=1), -CAP)
    contribution = 24 * np.exp(-CAP - top)
    assert abs(_padded_message_number(f, "they contribute ") - contribution[0]) < 1e-5 * contribution[0]
    assert contribution[0] == 24.0
    real_alone = np.exp(capped[0] - top[0]).sum()
    assert abs(_padded_message_number(f, "the real lanes alone give ", ")") - real_alone) < 1e-3
    (gpu_lse, gpu_loss), (right_lse, right_loss) = _softcap_references(z, labels)
    assert torch.allclose(lse, gpu_lse, rtol=1e-6, atol=1e-4) and torch.allclose(loss, gpu_loss, atol=1e-4)
    assert abs(loss[0].item() - np.log(1024)) < 1e-4 and abs(right_loss[0].item() - np.log(1000)) < 1e-4
    assert abs(loss[0] - right_loss[0]).item() > 0.02              # ln(1024) - ln(1000) = 0.0237
    # row 1 (near -CAP): the padding shows; row 2 (ordinary logits): 24 * exp(-30 - top) vanishes in float32
    assert abs(loss[1] - right_loss[1]).item() > 1e-3 and torch.allclose(loss[2], right_loss[2])


@pytest.mark.parametrize("batch", [True, False])
def test_softcap_remasked_matches_torch(batch):
    z, labels = _softcap_rows()
    loss, lse = K.softcap_cross_entropy(_traced(K.softcap_lse_remasked, batch=batch), z, labels, CAP)
    assert _findings() == ()
    _, (right_lse, right_loss) = _softcap_references(z, labels)
    assert torch.allclose(lse, right_lse, rtol=1e-6, atol=1e-4) and torch.allclose(loss, right_loss, atol=1e-4)


def _through(op, other):
    """The padded lanes' contribution to padded_through's sum, in numpy (float32 where the kernel is)."""
    o = np.float32(other)
    f32 = {
        "abs": abs(o), "erf": math.erf(o), "rsqrt": 1 / np.sqrt(o), "sqrt": np.sqrt(o), "sqrt_rn": np.sqrt(o),
        "div_rn": o / np.float32(3), "fdiv": o / np.float32(3), "exp2": np.exp2(o), "log": np.log(o),
        "cos": np.cos(o), "ceil": np.ceil(o), "fma": o * o + o, "minimum": min(o, 2), "maximum": max(o, 0.125),
        "clamp": min(max(o, 0), 2), "sigmoid": 1 / (1 + np.exp(-o)), "libdevice_tanh": np.tanh(o),
        "libdevice_pow": o ** o, "join_split": 3 * o, "cat": 2 * o,
        "int_umulhi": (int(o * 28) << 30) >> 32, "int_floordiv": int(o * 28) // 2, "int_shift": int(o * 28) >> 1}
    return float(f32[op])


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("op", K.PAD_OPS)
def test_padding_is_followed_through_every_kind_of_op(op, batch):
    """padded_through sums op(x) over 32 lanes, 20 real, 12 padded with 0.25: every op keeps 0.25 away from
    the sum's neutral 0, so each is a finding whose contribution numpy computes here."""
    from helpers.source import marked_line
    x = 0.5 + 0.5 * torch.rand(32, generator=torch.Generator().manual_seed(2))
    out = torch.zeros(1)
    _traced(K.padded_through, batch=batch)[(1,)](x, out, 20, OTHER=0.25, OP=op, BLOCK=32)
    found = _findings()
    assert [f.kind for f in found] == ["padded_reduction"], (op, [f.message for f in found])
    f = found[0]
    assert f.line == marked_line(K.padded_through, "# REDUCE") and f.count == 12 * (2 if op == "cat" else 1)
    want = 12 * _through(op, 0.25)
    assert abs(_padded_message_number(f, "they contribute ") - want) <= 1e-5 * abs(want), (op, f.message)


@pytest.mark.parametrize("batch", [True, False])
def test_padding_through_libdevice_moves_a_max(batch):
    from helpers.source import marked_line
    x = -4.0 - torch.rand(32, generator=torch.Generator().manual_seed(3))
    out = torch.zeros(1)
    _traced(K.padded_max_tanh, batch=batch)[(1,)](x, out, 20, BLOCK=32)
    found = _findings()
    assert [f.kind for f in found] == ["padded_reduction"] and "tl.max" in found[0].message
    f = found[0]
    assert f.line == marked_line(K.padded_max_tanh, "# REDUCE") and out.item() == 0.0   # tanh(0) of the padding
    without = np.tanh(x[:20].numpy().astype(np.float64)).max()
    assert abs(_padded_message_number(f, "the real lanes alone give ", ")") - without) < 1e-6
    assert abs(_padded_message_number(f, "they contribute ") + without) < 1e-6


# ---------------------------------------------------------------- softcap in an online logsumexp (Liger cross entropy)

ROWS_OL, V_OL, BLOCK_OL = 3, 1000, 256        # 4 blocks of 256: the last holds 232 real lanes and 24 padded


def _online_rows():
    """Row 0: every logit far below -CAP (capped to -CAP, as the padding is); row 1: near -CAP; row 2: ordinary."""
    z = torch.full((ROWS_OL, V_OL), -1e4)
    z[1] = -60.0 + torch.randn(V_OL, generator=torch.Generator().manual_seed(4))
    z[2] = 3.0 * torch.randn(V_OL, generator=torch.Generator().manual_seed(5))
    return z


@pytest.mark.parametrize("batch", [True, False])
def test_online_softcap_counts_the_last_blocks_padding(batch):
    from helpers.source import marked_line
    z = _online_rows()
    lse = K.online_softcap_lse(_traced(K.online_lse_softcap_padded, batch=batch), z, CAP, BLOCK_OL)
    found = _findings()
    assert [f.kind for f in found] == ["padded_reduction"], [f.message for f in found]
    f = found[0]
    assert f.line == marked_line(K.online_lse_softcap_padded) and "tl.sum" in f.message and "other=-inf" in f.message
    # numpy, independently: blocks of 256 over 1000 columns leave 4 * 256 - 1000 padded lanes, all in the last
    # block, in each of the 3 rows (programs)
    npad = -(-V_OL // BLOCK_OL) * BLOCK_OL - V_OL
    assert npad == 24 and f.count == ROWS_OL * npad and f.extent["programs"]["count"] == ROWS_OL
    # row 0's last block: 232 real lanes and 24 padded ones, all at -CAP, shifted by the running max -CAP
    zn = z.numpy().astype(np.float64)
    capped = CAP * np.tanh(zn / CAP)
    last = capped[0, (V_OL // BLOCK_OL) * BLOCK_OL:]
    m0 = max(capped[0].max(), -CAP)
    assert abs(_padded_message_number(f, "they contribute ") - npad * np.exp(-CAP - m0)) < 1e-4
    assert abs(_padded_message_number(f, "the real lanes alone give ", ")") - np.exp(last - m0).sum()) < 1e-3
    # what the GPU computes: the logsumexp with npad extra lanes at -CAP; the right value: without them
    with_pad = np.concatenate([capped, np.full((ROWS_OL, npad), -CAP)], axis=1)
    gpu = np.log(np.exp(with_pad - with_pad.max(1, keepdims=True)).sum(1)) + with_pad.max(1)
    right = np.log(np.exp(capped - capped.max(1, keepdims=True)).sum(1)) + capped.max(1)
    assert np.allclose(lse.numpy(), gpu, atol=1e-4)
    assert abs(lse[0].item() - right[0] - np.log(1024 / 1000)) < 1e-4        # ln 1024 for ln 1000 above -CAP
    assert abs(lse[1].item() - right[1]) > 1e-3 and abs(lse[2].item() - right[2]) < 1e-5


@pytest.mark.parametrize("batch", [True, False])
def test_online_softcap_remasked_matches_torch(batch):
    z = _online_rows()
    lse = K.online_softcap_lse(_traced(K.online_lse_softcap_remasked, batch=batch), z, CAP, BLOCK_OL)
    assert _findings() == ()
    assert torch.allclose(lse, torch.logsumexp(CAP * torch.tanh(z / CAP), 1), atol=1e-4)


# ---------------------------------------------------------------- row * row_stride in int32 (Liger softmax)

# rows 2**20 int8 elements apart: row 2048 starts at element 2**31, which wraps to -2**31 in int32. Only the
# first 1024 elements of each row are touched, so the 2 GiB are address space.
R_SM, STRIDE_SM, C_SM = 2049, 1 << 20, 1024


@pytest.fixture(scope="module")
def strided_rows():
    try:
        base = torch.empty((R_SM - 1) * STRIDE_SM + C_SM, dtype=torch.int8)
    except RuntimeError as e:
        pytest.skip(f"cannot reserve {(R_SM - 1) * STRIDE_SM >> 20} MiB of address space: {e}")
    x = base.as_strided((R_SM, C_SM), (STRIDE_SM, 1))
    x.copy_(torch.randint(-100, 100, (R_SM, C_SM), dtype=torch.int8, generator=torch.Generator().manual_seed(6)))
    return x


def test_int32_row_offset_wraps_past_two_to_the_31(strided_rows):
    from helpers.source import marked_line
    K.row_softmax(_traced(K.row_softmax_int32), strided_rows)
    found = _findings()
    assert sorted(f.kind for f in found) == ["out_of_bounds", "overflow"], [f.message for f in found]
    # numpy, independently: each row's start in int64 and as int32 arithmetic leaves it
    start = np.arange(R_SM, dtype=np.int64) * STRIDE_SM
    wrapped = (start + (1 << 31)) % (1 << 32) - (1 << 31)
    bad = np.nonzero(wrapped != start)[0]
    assert bad.tolist() == [2048]
    for f in found:
        assert f.line == marked_line(K.row_softmax_int32) and f.tensor == "x_ptr"
        assert f.count == len(bad) * C_SM and f.program == (int(bad[0]), 0, 0)
    oob = next(f for f in found if f.kind == "out_of_bounds")
    assert min(oob.offsets) == wrapped[bad].min() == -(1 << 31)


def test_int64_row_offset_reads_every_row(strided_rows):
    y = K.row_softmax(_traced(K.row_softmax_int64), strided_rows)
    assert _findings() == ()
    assert torch.allclose(y, torch.softmax(strided_rows.float(), 1), atol=1e-6)
