"""A kernel's early ``return`` that the programs of a chunk take differently (``if n_tokens == 0: return``
of an MoE expert, a ragged batch's empty rows) keeps the chunk batched: the programs that leave sit out the
rest of the kernel, as a GPU's finished warps do (record/divergence/exits.py). Outputs equal torch's, and
the whole trace, the value findings and the metrics equal those of one program at a time (and Triton's own
interpreter's outputs: the ``early_exits`` case of tests/record/test_dropin.py)."""
import ast

import pytest
import torch
import triton
import triton.language as tl

from helpers.batch import same_as_one_at_a_time
from kernels import moe


@triton.jit
def routed(x_ptr, counts_ptr, out_ptr, hits_ptr, B: tl.constexpr):
    """An expert with no tokens returns at once; the others loop over their own count of blocks (a masked
    loop after the exit), branch on it, count themselves with an atomic and store."""
    pid = tl.program_id(0)
    n = tl.load(counts_ptr + pid)
    if n == 0:
        return
    acc = tl.zeros((B,), dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + pid * 4 * B + i * B + tl.arange(0, B))
    if n > 2:
        acc = acc * 0.5
    tl.atomic_add(hits_ptr, 1)
    tl.store(out_ptr + pid * B + tl.arange(0, B), acc)


def _routed(w, counts=None):
    torch.manual_seed(3)
    P, B = 64, 8
    if counts is None:
        counts = torch.randint(0, 5, (P,), dtype=torch.int32)
        counts[torch.randperm(P)[:P // 3]] = 0              # a third of the experts get no tokens, scattered
    x = torch.randn(P * 4 * B)
    out, hits = torch.full((P * B,), -7.0), torch.zeros(1, dtype=torch.int32)
    w(routed)[(P,)](x, counts, out, hits, B=B)
    xs = x.view(P, 4, B)
    want = torch.stack([xs[p, :int(c)].sum(0) * (0.5 if c > 2 else 1.0) if c else torch.full((B,), -7.0)
                        for p, c in enumerate(counts)])
    assert torch.allclose(out.view(P, B), want, rtol=1e-6, atol=1e-6)
    assert int(hits) == int((counts > 0).sum())
    return torch.cat([out, hits.float()])


@triton.jit
def flagged_exits(x_ptr, flags_ptr, out_ptr, B: tl.constexpr):
    """Two exits one after the other, the first storing a marker before it leaves, the second on a float
    condition (a NaN leaves too, as ``bool(nan)`` is true)."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    f = tl.load(flags_ptr + pid)
    if f < 0:
        tl.store(out_ptr + offs, tl.full((B,), -1.0, tl.float32))
        return
    s = tl.sum(tl.load(x_ptr + offs), axis=0)
    if s != s:
        return
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * f.to(tl.float32) + s)


def _flagged_exits(w):
    torch.manual_seed(4)
    P, B = 48, 4
    flags = torch.randint(-1, 3, (P,), dtype=torch.int32)
    x = torch.randn(P * B)
    x[8 * B + 1] = float("nan")                          # program 8's sum is NaN: it leaves at the second exit
    flags[8] = 1
    out = torch.zeros(P * B)
    w(flagged_exits)[(P,)](x, flags, out, B=B)
    xs = x.view(P, B)
    s = xs.sum(1, keepdim=True)
    want = torch.where(flags[:, None] < 0, -1.0, torch.where(torch.isnan(s), 0.0, xs * flags[:, None].float() + s))
    assert torch.allclose(out.view(P, B), want, rtol=1e-6, atol=1e-6)
    return out


@triton.jit
def exits_with_else(x_ptr, flags_ptr, out_ptr, B: tl.constexpr):
    """``if`` / ``elif`` exits with an ``else`` that binds a name read after it."""
    pid = tl.program_id(0)
    f = tl.load(flags_ptr + pid)
    if f == 0:
        return
    elif f == 1:
        tl.store(out_ptr + pid * B + tl.arange(0, B), tl.full((B,), 5.0, tl.float32))
        return
    else:
        scale = f.to(tl.float32) * 0.5
    tl.store(out_ptr + pid * B + tl.arange(0, B), tl.load(x_ptr + pid * B + tl.arange(0, B)) * scale)


def _with_else(w):
    torch.manual_seed(6)
    flags = torch.randint(0, 4, (64,), dtype=torch.int32)
    x, out = torch.randn(64 * 4), torch.zeros(64 * 4)
    w(exits_with_else)[(64,)](x, flags, out, B=4)
    f = flags.repeat_interleave(4)
    assert torch.equal(out, torch.where(f == 0, 0.0, torch.where(f == 1, 5.0, x * (f.float() * 0.5))))
    return out


def _experts(w):
    """MoE tiles (kernels/moe.py): the tiles past an expert's token count return, the others run a ``tl.dot``
    after the exit."""
    torch.manual_seed(7)
    E, TILES, BM, D = 16, 4, 16, 16
    counts = torch.randint(0, TILES * BM + 1, (E,), dtype=torch.int32)
    counts[::5] = 0
    x, wt = torch.randn(E * TILES * BM, D).half(), torch.randn(E, D, D).half()
    out = moe.expert_tiles(x, counts, wt, kernel=w(moe.make_expert_tiles()), block_m=BM)
    assert torch.allclose(out, moe.expert_tiles_reference(x, counts, wt), rtol=1e-3, atol=1e-3)
    return out


def _all_leave(w):
    return _routed(w, counts=torch.zeros(64, dtype=torch.int32))


def _none_leave(w):
    return _routed(w, counts=torch.randint(1, 5, (64,), dtype=torch.int32))


def _tail_leaves(w):            # a few programs leave, in one run: masked too
    return _routed(w, counts=torch.cat([torch.randint(1, 5, (48,), dtype=torch.int32),
                                        torch.zeros(16, dtype=torch.int32)]))


def _most_leave(w):             # most leave, in long runs: the chunk splits into the runs, as before
    return _routed(w, counts=torch.cat([torch.randint(1, 5, (16,), dtype=torch.int32),
                                        torch.zeros(48, dtype=torch.int32)]))


@triton.jit
def through_a_list(x_ptr, counts_ptr, out_ptr, B: tl.constexpr):
    """A Python list of blocks (the interpreter runs it; the compiler would not) made before the exit and
    read after it: a value compact.py cannot cut, so the programs left stay masked."""
    pid = tl.program_id(0)
    parts = [tl.load(x_ptr + pid * B + tl.arange(0, B)), tl.load(x_ptr + 64 * B + tl.arange(0, B))]
    if tl.load(counts_ptr + pid) == 0:
        return
    tl.store(out_ptr + pid * B + tl.arange(0, B), parts[0] + parts[1])


def _uncuttable(w):
    torch.manual_seed(5)
    counts = torch.randint(0, 2, (64,), dtype=torch.int32)
    x, out = torch.randn(65 * 4), torch.zeros(64 * 4)
    w(through_a_list)[(64,)](x, counts, out, B=4)
    assert torch.equal(out, torch.where(counts.repeat_interleave(4) > 0, x[:256] + x[256:].repeat(64), 0.0))
    return out


MASKED = [_routed, _flagged_exits, _tail_leaves, _with_else, _experts]


@pytest.mark.parametrize("compact_at", [0.0, 0.75, 1.0], ids=["masked", "default", "always-cut"])
@pytest.mark.parametrize("run", MASKED + [_all_leave, _none_leave, _most_leave, _uncuttable],
                         ids=lambda f: f.__name__[1:])
def test_early_exits_record_what_one_program_at_a_time_records(run, compact_at, monkeypatch):
    # COMPACT_AT 0: the programs left always run masked; 1: the chunk is cut to them at every exit
    from triton_trace.record.divergence import exits as maskedexits, loops as maskedloops
    monkeypatch.setattr(maskedexits, "COMPACT_AT", compact_at)
    monkeypatch.setattr(maskedloops, "COMPACT_AT", 0.0)      # loops never cut here: every cut is an exit's
    cuts = []
    real_sub = maskedexits.batch.Chunk.sub
    monkeypatch.setattr(maskedexits.batch.Chunk, "sub", lambda self, keep: cuts.append(int(keep.sum())) or
                        real_sub(self, keep))
    traces, _ = same_as_one_at_a_time(run)
    launch = traces[1].launches[0]
    ex = launch.meta["execution"]
    assert ex["batched_programs"] == launch.recorded_programs and not ex["fallbacks"], ex
    if run in MASKED:                       # the leaving programs masked out, the chunk whole
        assert ex["diverged_chunks"] == 0, ex
    if run is _most_leave:
        assert ex["diverged_chunks"] >= 1, ex
    if run in (_routed, _tail_leaves, _flagged_exits, _experts):
        # a third, a quarter, about a quarter then one program leave: cut where that leaves COMPACT_AT or fewer
        assert bool(cuts) == (compact_at > 0.5), cuts
    if run in (_uncuttable, _none_leave, _all_leave):
        assert not cuts, cuts                  # a list cannot be cut: masked


def _rewrite(src: str, kernel: bool) -> str:
    from triton_trace.record.divergence import rewrite as looprewrite
    return ast.unparse(looprewrite.transform(ast.parse(src), kernel=kernel))


def test_only_the_kernels_own_exits_are_rewritten():
    from triton_trace.record.divergence import rewrite as looprewrite
    src = ("def k(p, q):\n    if p == 0:\n        return\n    if q:\n        x = 1\n        return\n"
           "    for i in range(p):\n        if i:\n            return\n    y = 2\n")
    text = _rewrite(src, kernel=True)
    assert f"if {looprewrite.EXIT}(" in text and text.count(looprewrite.EXIT + "(") == 2, text
    # after each exit, the names read later are cut (where the exit cuts the chunk) and bound again
    cut = looprewrite.CUT
    assert f"{cut}(locals(), ('i', 'p', 'q'))" in text and f"{cut}(locals(), ('i', 'p'))" in text, text
    assert looprewrite.IF + "('p' in" not in text, text       # the rebinding is no masked branch
    # the statements before the second return stay a branch of their own (masked where programs disagree)
    assert looprewrite.IF + "(" in text, text
    # a return in a loop is left as it is (the loop is not rewritten either)
    assert "if i:\n            return" in text, text
    # a helper's return leaves only the helper: helpers keep theirs
    assert looprewrite.EXIT not in _rewrite(src, kernel=False)


def test_an_exit_with_a_value_is_left_alone():
    from triton_trace.record.divergence import rewrite as looprewrite
    src = "def k(p):\n    if p > 1:\n        return 3\n    x = p\n"
    assert looprewrite.EXIT not in _rewrite(src, kernel=True)


def test_an_exits_else_follows_it():
    """``if a: return`` / ``elif b: return`` / ``else: B``: the else runs exactly when neither exit is taken."""
    from triton_trace.record.divergence import rewrite as looprewrite
    src = "def k(p):\n    if p == 0:\n        return\n    elif p == 1:\n        return\n    else:\n        x = p\n    y = x\n"
    text = _rewrite(src, kernel=True)
    assert text.count(looprewrite.EXIT + "(") == 2 and "else" not in text, text
    assert text.index(looprewrite.EXIT + "(") < text.index("x = p") < text.index("y = x"), text
