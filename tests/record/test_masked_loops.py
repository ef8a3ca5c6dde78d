"""Loops whose trip count differs between programs run batched, masked (record/divergence/loops.py): the
outputs and the whole trace (ops, seq numbers, lanes, values, flops, findings) must be those of one
program at a time, and the chunk must not split."""
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.batch import assert_same_traces, same_as_one_at_a_time


@triton.jit
def ragged_rows(x_ptr, lens_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    """Sum of each row's first lens[row] elements, a block at a time (a variable-length batch)."""
    row = tl.program_id(0)
    n = tl.load(lens_ptr + row)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    cols = tl.arange(0, BLOCK)
    for start in range(0, n, BLOCK):
        inside = start + cols < n
        x = tl.load(x_ptr + row * stride + start + cols, mask=inside, other=0.0)
        acc += tl.where(inside, tl.exp(x) * 2.0, 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def causal_like(q_ptr, out_ptr, cnt_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    """Each program runs pid + 1 trips; a nested loop runs (pid % 3) + 1 trips inside; atomics count trips."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    for j in range(0, (pid + 1) * BLOCK, BLOCK):
        v = tl.load(q_ptr + j + offs)
        best = tl.maximum(best, v)
        for i in range(0, pid % 3 + 1):
            acc = acc * 0.5 + v * i
        tl.atomic_add(cnt_ptr + pid, 1)
        tl.store(out_ptr + pid * N + j + offs, acc)
    tl.store(out_ptr + pid * N + offs, acc + best, mask=offs < 4)


@triton.jit
def makes_inf(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Programs past their trips compute exp of large values: only real trips may report the overflow."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, pid, 1):
        acc += tl.exp(tl.load(x_ptr + k * BLOCK + offs) * (k + 1))
    tl.store(out_ptr + pid * BLOCK + offs, acc)


@triton.jit
def first_set_inside(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Program 0 runs no trip and never binds ``last``, which nothing after the loop reads: the chunk runs
    whole (program 0's rows of ``last`` are never read)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, pid):
        last = tl.load(x_ptr + k * BLOCK + offs)
        total += last
    tl.store(out_ptr + pid * BLOCK + offs, total)


@triton.jit
def first_set_read_after(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """As first_set_inside, but ``last`` is read after the loop (by the programs that bound it): program 0
    must not run with the others."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, pid):
        last = tl.load(x_ptr + k * BLOCK + offs)
        total += last
    if pid > 0:
        total += last * 0.5
    tl.store(out_ptr + pid * BLOCK + offs, total)


@triton.jit
def int_growth(out_ptr, BLOCK: tl.constexpr):
    """Program p runs 4p trips of v = 3v + 1 on int32: the later programs wrap around (reported once it
    reaches memory); trips other programs sit out must not be what the report names."""
    pid = tl.program_id(0)
    v = tl.full([BLOCK], 7, tl.int32) + pid
    for k in range(0, pid * 4):
        v = v * 3 + 1
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), v)


def _ints(w):
    out = torch.empty(8 * 4, dtype=torch.int32)
    w(int_growth)[(8,)](out, BLOCK=4)
    return out


def _ragged(w, lens=None):
    x = torch.randn(24, 100)
    lens = torch.tensor(lens or [(7 * i) % 100 + 1 for i in range(24)], dtype=torch.int32)
    out = torch.empty(24)
    w(ragged_rows)[(24,)](x, lens, out, x.stride(0), BLOCK=16)
    want = torch.stack([(x[i, :int(lens[i])].exp() * 2).sum() for i in range(24)])
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    return out


def _ragged_runs(w):
    """Neighbours agree (runs of 6 programs): a loop whose values cannot be cut runs as those runs."""
    return _ragged(w, [40] * 6 + [90] * 6 + [10] * 6 + [70] * 6)


def _causal(w):
    q = torch.randn(12 * 16)
    out, cnt = torch.zeros(12 * 12 * 16), torch.zeros(12, dtype=torch.int32)
    w(causal_like)[(12,)](q, out, cnt, N=12 * 16, BLOCK=16)
    assert cnt.tolist() == [p + 1 for p in range(12)]
    return out


def _inf(w):
    x = torch.full((16 * 16,), 30.0)
    out = torch.empty(16 * 16)
    w(makes_inf)[(16,)](x, out, BLOCK=16)
    return out


def _first_set(w):
    x = torch.randn(10 * 8)
    out = torch.empty(10 * 8)
    w(first_set_inside)[(10,)](x, out, BLOCK=8)
    return out


def _read_after(w):
    x = torch.randn(10 * 8)
    out = torch.empty(10 * 8)
    w(first_set_read_after)[(10,)](x, out, BLOCK=8)
    xs = x.view(10, 8)
    want = torch.stack([xs[:p].sum(0) + xs[p - 1] * 0.5 if p else torch.zeros(8) for p in range(10)])
    torch.testing.assert_close(out.view(10, 8), want)
    return out


@triton.jit
def heads_causal(q_ptr, k_ptr, out_ptr, S: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Causal attention's shape: query blocks on grid axis 0, heads on axis 1, so neighbours in launch
    order run different trip counts and every head repeats the pattern (runs of one program)."""
    m, h = tl.program_id(0), tl.program_id(1)
    rows = m * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + h * S * D + rows[:, None] * D + d[None, :])
    acc = tl.zeros([BM, D], tl.float32)
    top = tl.full([BM], float("-inf"), tl.float32)
    for start in range(0, (m + 1) * BM, BN):
        cols = start + tl.arange(0, BN)
        k = tl.load(k_ptr + h * S * D + cols[None, :] * D + d[:, None])
        s = tl.dot(q, k)
        s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
        top = tl.maximum(top, tl.max(s, 1))
        acc += tl.dot(tl.exp(s - top[:, None]), tl.trans(k))
    tl.store(out_ptr + h * S * D + rows[:, None] * D + d[None, :], acc + top[:, None])


def _heads(w):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(3, 64, 16, generator=g), torch.randn(3, 64, 16, generator=g)
    out = torch.empty(3, 64, 16)
    w(heads_causal)[(4, 3)](q, k, out, S=64, D=16, BM=16, BN=16)
    return out


@triton.jit
def _sum_blocks(acc, x_ptr, offs, lo, hi, B: tl.constexpr):
    for start in tl.range(lo, hi, B, num_stages=2):
        acc += tl.load(x_ptr + start + offs) * (start + 1)
    return acc


@triton.jit
def helper_tl_range(x_ptr, out_ptr, B: tl.constexpr):
    """The fused-attention tutorial's shape: the loop sits in a @triton.jit helper and uses tl.range."""
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    acc = tl.zeros([B], tl.float32)
    acc = _sum_blocks(acc, x_ptr, offs, 0, (pid % 5 + 1) * B, B)
    tl.store(out_ptr + pid * B + offs, acc)


def _helper(w):
    x = torch.randn(5 * 8, generator=torch.Generator().manual_seed(4))
    out = torch.empty(13 * 8)
    w(helper_tl_range)[(13,)](x, out, B=8)
    want = torch.stack([sum(x[s:s + 8] * (s + 1) for s in range(0, (p % 5 + 1) * 8, 8)) for p in range(13)])
    torch.testing.assert_close(out.view(13, 8), want)
    return out


@triton.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, GROUP_M: tl.constexpr):
    """Triton's persistent matmul tutorial's shape: each program walks tiles pid, pid + NUM_SMS, ... (its
    own start, and one trip fewer for the programs past the last full round), with grouped tile order."""
    start_pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        group = tile_id // (GROUP_M * num_pid_n)
        first_m = group * GROUP_M
        size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile_id % size_m)
        pid_n = (tile_id % (GROUP_M * num_pid_n)) // size_m
        rm, rn = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)
        acc = tl.zeros([BM, BN], tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            rk = k * BK + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _persistent(w):
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(72, 40, generator=g), torch.randn(40, 56, generator=g)
    c = torch.empty(72, 56)
    w(persistent_matmul)[(5,)](a, b, c, 72, 56, 40, NUM_SMS=5, BM=16, BN=16, BK=16, GROUP_M=2)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    return c


def _more_programs_than_tiles(w):
    """20 programs for 6 tiles: most make no trip, so every memory op runs on the few that do (no op of the
    chunk has all its programs), and what the loop binds is never bound for the others."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(48, 40, generator=g), torch.randn(40, 32, generator=g)
    c = torch.empty(48, 32)
    w(persistent_matmul)[(20,)](a, b, c, 48, 32, 40, NUM_SMS=20, BM=16, BN=16, BK=16, GROUP_M=2)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    return c


@triton.jit
def bisect(sorted_ptr, keys_ptr, out_ptr, n, B: tl.constexpr):
    """A binary search per key in a ``while`` loop: each program's trip count depends on its key."""
    pid = tl.program_id(0)
    key = tl.load(keys_ptr + pid)
    lo = pid * 0
    hi = lo + n
    while lo < hi:
        mid = (lo + hi) // 2
        v = tl.load(sorted_ptr + mid)
        lo = tl.where(v < key, mid + 1, lo)
        hi = tl.where(v < key, hi, mid)
    tl.store(out_ptr + pid, lo)


def _bisect(w):
    g = torch.Generator().manual_seed(6)
    table = torch.sort(torch.randn(37, generator=g)).values
    keys = torch.cat([torch.randn(20, generator=g), table[:5], torch.tensor([-9.0, 9.0])])
    out = torch.empty(len(keys), dtype=torch.int32)
    w(bisect)[(len(keys),)](table, keys, out, 37, B=1)
    assert out.tolist() == torch.searchsorted(table, keys).tolist()
    return out


@triton.jit
def while_blocks(x_ptr, lens_ptr, out_ptr, stride, B: tl.constexpr):
    """The ragged row sum with a ``while`` loop and a counter: rows end at different trips."""
    row = tl.program_id(0)
    n = tl.load(lens_ptr + row)
    acc = tl.zeros([B], tl.float32)
    start = row * 0
    while start < n:
        cols = start + tl.arange(0, B)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
        start += B
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def _while_rows(w):
    x = torch.randn(24, 100, generator=torch.Generator().manual_seed(7))
    lens = torch.tensor([(11 * i) % 100 + 1 for i in range(24)], dtype=torch.int32)
    out = torch.empty(24)
    w(while_blocks)[(24,)](x, lens, out, x.stride(0), B=16)
    torch.testing.assert_close(out, torch.stack([x[i, :int(lens[i])].sum() for i in range(24)]),
                               rtol=1e-5, atol=1e-5)
    return out


@triton.jit
def counts_trips(x_ptr, n_ptr, out_ptr, B: tl.constexpr):
    """A counter carried through the loop (the interpreter makes ``trips + 1`` a scalar tensor): programs
    leaving at different trips keep their own counts."""
    pid = tl.program_id(0)
    n = tl.load(n_ptr + pid)
    acc = tl.zeros([B], tl.float32)
    trips = 0
    for i in range(0, n):
        acc += tl.load(x_ptr + i * B + tl.arange(0, B))
        trips = trips + 1
    tl.store(out_ptr + pid * B + tl.arange(0, B), acc * trips)


def _counter(w):
    x = torch.randn(8 * 4, generator=torch.Generator().manual_seed(3))
    n = torch.tensor([2, 2, 2, 2, 5, 5, 5, 5], dtype=torch.int32)
    out = torch.empty(8 * 4)
    w(counts_trips)[(8,)](x, n, out, B=4)
    return out


@pytest.mark.parametrize("compact_at", [0.0, 0.75, 1.0, None], ids=["masked", "default", "always-cut", "uncuttable"])
@pytest.mark.parametrize("run", [_ragged, _ragged_runs, _causal, _inf, _first_set, _read_after, _ints, _heads, _counter,
                                 _helper, _persistent, _more_programs_than_tiles, _bisect, _while_rows],
                         ids=lambda f: f.__name__[1:])
def test_masked_loops_record_what_one_program_at_a_time_records(run, compact_at, monkeypatch):
    # COMPACT_AT 0: trips only ever run masked; 1: cut to the running programs whenever one leaves;
    # None: as if some value could not be cut (masked, or runs of agreeing programs where those are long)
    from triton_trace.record.batch import compact
    from triton_trace.record.divergence import loops as maskedloops
    if compact_at is None:
        monkeypatch.setattr(compact, "can_take", lambda value: False)
    else:
        monkeypatch.setattr(maskedloops, "COMPACT_AT", compact_at)
    traces, _ = same_as_one_at_a_time(run)
    ex = traces[1].launches[0].meta["execution"]
    programs = traces[1].launches[0].recorded_programs
    # (_ints: each program's wrap keeps its own lanes, so differing wraps run masked too)
    if run in (_ragged_runs, _counter) and compact_at is None:     # cannot be cut, neighbours agree: runs
        assert ex["diverged_chunks"] == 1 and ex["batched_programs"] == programs, ex
    elif run is not _read_after:
        assert ex["diverged_chunks"] == 0 and not ex["fallbacks"], ex     # masked, not split
        assert ex["batched_programs"] == programs
    else:                                                   # program 0 (no trip) runs apart, the rest batched
        assert ex["diverged_chunks"] == 1 and ex["batched_programs"] == programs - 1, ex


def test_nonfinite_from_a_masked_trip_names_a_program_that_ran_it():
    triton_trace.reset()
    _inf(triton_trace.trace)
    reports = triton_trace.current_trace().launches[0].meta.get("nonfinite") or []
    assert reports and all(r["program"][0] >= 3 for r in reports), reports     # exp(30 * 3) overflows first


def test_a_loop_variable_read_after_the_loop_is_left_alone():
    from triton_trace.record.divergence import rewrite as looprewrite
    import ast
    src = ("def k(n):\n    for i in range(0, n):\n        x = i\n    y = i\n"
           "    for j in range(n):\n        z = j\n")
    tree = looprewrite.transform(ast.parse(src))
    text = ast.unparse(tree)
    # left out of the masked-loop rewrite; only its variable is typed as compiled (induction.py)
    assert f"for i in {looprewrite.induction.RANGE}(range, 0, n)" in text and looprewrite.LOOP + "(n, " in text


@triton.jit
def sequential_loops(x_ptr, n_ptr, out_ptr, B: tl.constexpr):
    """fla's recurrent kernels' shape: one loop after another at the kernel's top level, with branches between
    them, each loop running a different number of trips per program."""
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    n = tl.load(n_ptr + pid)
    acc = tl.zeros([B], tl.float32)
    for t in range(0, n):
        acc = acc * 0.5 + tl.load(x_ptr + t * B + offs)
    if pid < 3:
        acc = acc + 1.0
    back = tl.zeros([B], tl.float32)
    for t in range(0, n + 1):
        back += tl.load(x_ptr + (n - t) * B + offs) * (t + 1)
    if n > 2:
        back = -back
    tl.store(out_ptr + pid * B + offs, acc + back)


def test_sequential_loops_are_rewritten_in_one_pass_and_compute_what_torch_does(monkeypatch):
    """The rewrite walks the function once for its names, whatever its length (once per top-level statement
    made it quadratic), and the hooks of one loop after another keep their own names."""
    import ast
    from triton_trace.record.divergence import rewrite as looprewrite
    walks = []
    real = looprewrite._local_names
    monkeypatch.setattr(looprewrite, "_local_names", lambda fn: walks.append(fn) or real(fn))
    body = "".join(f"    for i{k} in range(n):\n        x = x + i{k}\n    if x > {k}:\n        x = x - 1\n"
                   for k in range(30))
    text = ast.unparse(looprewrite.transform(ast.parse(f"def k(n, x):\n{body}    return x\n")))
    assert len(walks) == 1
    heads = [line.split(" = ")[0].strip() for line in text.splitlines() if f" = {looprewrite.LOOP}(" in line]
    assert len(heads) == 30 and len(set(heads)) == 30

    B, P = 4, 6
    x = torch.rand(8 * B, generator=torch.Generator().manual_seed(1))
    n = torch.tensor([0, 0, 2, 2, 7, 7], dtype=torch.int32)
    out = torch.empty(P * B)
    triton_trace.reset()
    triton_trace.trace(sequential_loops)[(P,)](x, n, out, B=B)
    rows = x.view(8, B).double()
    for p in range(P):
        acc = torch.zeros(B, dtype=torch.float64)
        for t in range(int(n[p])):
            acc = acc * 0.5 + rows[t]
        acc = acc + 1.0 if p < 3 else acc
        back = sum(rows[int(n[p]) - t] * (t + 1) for t in range(int(n[p]) + 1))
        back = -back if n[p] > 2 else back
        torch.testing.assert_close(out[p * B:(p + 1) * B].double(), acc + back, rtol=1e-5, atol=1e-5)
    ex = triton_trace.current_trace().launches[0].meta["execution"]
    assert ex["batched_programs"] == P, ex


@triton.jit
def review_cases(x_ptr, n_ptr, out_ptr, idx_ptr, B: tl.constexpr):
    """What a review found: a tuple carried through the loop, the loop variable re-assigned
    (tl.multiple_of), ``and`` in the body, an argmax over rows that are NaN for programs sitting out, and an
    inner loop whose names are first bound on the outer loop's second trip."""
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    n = tl.load(n_ptr + pid)
    acc = (tl.zeros([B], tl.float32), tl.zeros([B], tl.float32) + 1.0)
    best = tl.zeros([B], tl.int32)
    deep = tl.zeros([B], tl.float32)
    for s in range(0, n):
        s = tl.multiple_of(s, 1)
        x = tl.load(x_ptr + s * B + offs, mask=(offs >= 0) and (offs < B), other=0.0)
        acc = (acc[0] + x + 1.0, acc[1] * 2.0)
        y = x / x                                   # NaN where x is 0 (the masked-off loads of other programs)
        best += tl.argmax(y + offs.to(tl.float32), 0)
        for j in range(0, s):
            deep += tl.load(x_ptr + j * B + offs)
    tl.store(out_ptr + pid * B + offs, acc[0] + acc[1] + deep)
    tl.store(idx_ptr + pid * B + offs, best)


def _review(w):
    x = torch.rand(8 * 4, generator=torch.Generator().manual_seed(0)) + 0.5
    n = torch.tensor([3, 1, 4, 2, 2, 1, 3, 4], dtype=torch.int32)
    out, idx = torch.empty(8 * 4), torch.empty(8 * 4, dtype=torch.int32)
    w(review_cases)[(8,)](x, n, out, idx, B=4)
    return torch.cat([out, idx.float()])


def test_review_cases_stay_exact_and_terminate(recwarn):
    traces, outs = [], []
    for batch in (False, True):
        triton_trace.reset()
        outs.append(_review(lambda k: triton_trace.trace(k, batch=batch)))
        traces.append(triton_trace.current_trace())
    assert outs[0].numpy().tobytes() == outs[1].numpy().tobytes()
    assert_same_traces(traces[0], traces[1])
    ex = traces[1].launches[0].meta["execution"]
    assert ex["diverged_chunks"] == 0 and ex["batched_programs"] == 8, ex        # all masked, none split
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("run", [_ragged, _persistent, _bisect], ids=lambda f: f.__name__[1:])
def test_masked_loops_with_a_program_filter_record_what_one_program_at_a_time_records(run):
    """``programs=`` keeps some programs: a sub-chunk's rows map to the kept ones (collector._sel)."""
    traces = []
    for batch in (False, True):
        triton_trace.reset()
        torch.manual_seed(0)
        run(lambda k: triton_trace.trace(k, batch=batch, programs=lambda p: p[0] % 3 != 1))
        traces.append(triton_trace.current_trace())
    assert_same_traces(traces[0], traces[1])
    launch = traces[1].launches[0]
    assert 0 < launch.recorded_programs < launch.meta["execution"]["batched_programs"]


@triton.jit
def _rows_in_trips(x_ptr, out_ptr, BLOCK: tl.constexpr, SHARE: tl.constexpr):
    """Program p makes p % 5 + 1 trips; each loads a block (its lanes all read or, for programs whose loop
    has ended, none) and stores one. SHARE: the stores overlap the next program's and a load reads them
    back, so the chunk is undone (its saved blocks put back) and runs one program at a time."""
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(pid % 5 + 1):
        acc += tl.load(x_ptr + (pid * 5 + i) * BLOCK + lanes)
        if SHARE:
            acc += tl.load(out_ptr + pid * BLOCK + BLOCK // 2 + lanes)
            tl.store(out_ptr + pid * BLOCK + lanes, acc)
        else:
            tl.store(out_ptr + (pid * 5 + i) * BLOCK + lanes, acc * (i + 1))


@pytest.mark.parametrize("share", [False, True])
def test_blocks_of_programs_that_sit_out_a_trip_move_a_run_at_a_time(share, monkeypatch):
    """Loads, stores and the undo log of a masked loop's trips, where the programs that sit out have no
    safe lane: the others' blocks are moved whole (affine runs), not lane by lane; outputs and traces are
    those of one program at a time (and, sharing, after the chunk was undone and re-run)."""
    from triton_trace.record.divergence import loops as maskedloops
    from triton_trace.record.interp.proxy import MemoryProxy
    monkeypatch.setattr(maskedloops, "COMPACT_AT", 0.0)     # trips masked, never cut to the running programs
    taken = []
    real = MemoryProxy._whole_rows

    def whole_rows(self, *a):
        found = real(self, *a)
        taken.append(found is not None)
        return found
    monkeypatch.setattr(MemoryProxy, "_whole_rows", whole_rows)
    x = torch.randn(40 * 5 * 128)
    outs = []
    for batch in (False, True):
        triton_trace.reset()
        out = torch.zeros(40 * 5 * 128 + 256)
        triton_trace.trace(_rows_in_trips, batch=batch)[(40,)](x, out, BLOCK=128, SHARE=share)
        outs.append((out, triton_trace.current_trace()))
    (seq, t_seq), (bat, t_bat) = outs
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert bool(ex["fallbacks"]) == share, ex
    assert any(taken)
