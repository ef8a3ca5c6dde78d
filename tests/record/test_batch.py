"""Batched execution gives exactly what one program at a time gives: outputs bit for bit, and the whole
trace (every row, offset, mask and value), on every kernel of the suite, the broken ones included."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from helpers.batch import CASES, assert_same_traces, flat_outputs, layer_norm_fwd_bwd, run_both
from helpers.release import runnable
import kernels as K
from kernels import broken as B


@pytest.mark.parametrize("chunk", [True, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_equals_sequential(name, chunk):
    (o1, t1), (o2, t2) = run_both(CASES[name], chunk)
    for a, b in zip(flat_outputs(o1), flat_outputs(o2)):
        assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8) if a.is_floating_point() else a,
                                                  b.view(torch.uint8) if b.is_floating_point() else b)
    assert_same_traces(t1, t2)


def _broken_run(case, kernel, chunk):
    opts = kernel.__triton_trace_options__
    saved = opts.chunk
    opts.chunk = chunk
    try:
        triton_trace.reset()
        torch.manual_seed(0)
        case.run(kernel, kernel is case.fixed)
        return triton_trace.current_trace()
    finally:
        opts.chunk = saved


@pytest.mark.parametrize("case", B.CASES, ids=lambda c: c.name)
def test_broken_kernels_batched_equal_sequential(case):
    runnable(case)
    # a kernel reading torch.empty memory computes with whatever was there: compare lanes, not values
    values = case.kind != "uninitialized_read"
    for kernel in {id(case.broken): case.broken, id(case.fixed): case.fixed}.values():
        assert_same_traces(_broken_run(case, kernel, 1), _broken_run(case, kernel, 4), values)


# kernels whose every program must run batched (no chunk falls back): the speed-up is real, not a fallback
EXPECT_BATCHED = ("add", "scale_bias", "softmax", "matmul", "matmul_fp16", "transpose_view", "cumsum", "autotune",
                  "heuristics", "nested_helper", "grid3d", "library_rms_norm", "library_layer_norm",
                  "library_gelu_tanh", "library_gelu_erf", "library_hash", "library_scale_bias_fp16")


@pytest.mark.parametrize("name", [n for n in EXPECT_BATCHED if n in CASES])
def test_batched_kernels_do_not_fall_back(name):
    triton_trace.reset()
    CASES[name]({"batch": True})
    for lc in triton_trace.current_trace().launches:
        ex = lc.meta["execution"]
        assert ex["fallbacks"] == [] and ex["batched_programs"] == lc.recorded_programs > 1, (lc.kernel_name, ex)


@triton.jit
def _repeat_add(x_ptr, n_ptr, out_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * N + tl.arange(0, N)
    acc = tl.zeros([N], dtype=tl.float32)
    i = 0
    while i < 3:
        if i < tl.load(n_ptr + pid):       # a branch that differs between programs: masked, or split into runs
            acc += tl.load(x_ptr + offs) * (i + 1.0)
        i += 1
    tl.store(out_ptr + offs, acc)


@triton.jit
def _repeat_add_range(x_ptr, n_ptr, out_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * N + tl.arange(0, N)
    acc = tl.zeros([N], dtype=tl.float32)
    for i in range(tl.load(n_ptr + pid)):
        acc += tl.load(x_ptr + offs) * (i + 1.0)
    tl.store(out_ptr + offs, acc)


def test_a_range_loop_whose_count_differs_runs_masked_in_one_chunk():
    """The same loop as a ``range``: one chunk, every program batched, trips past a program's count masked
    off (record/divergence/loops.py); the trace equals one program at a time, row for row."""
    x, n = torch.randn(64), torch.tensor([1, 0, 3, 1, 1, 1, 1, 1], dtype=torch.int32)
    (out_seq, t_seq), (out_bat, t_bat) = run_both(
        lambda o: (lambda out: (trace(_repeat_add_range, **o)[(8,)](x, n, out, N=8), out)[1])(torch.empty(64)), 8)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 8 and ex["diverged_chunks"] == 0 and not ex["fallbacks"], ex
    assert torch.equal(out_seq, out_bat)
    assert_same_traces(t_seq, t_bat)


def test_a_branch_that_programs_take_differently_runs_masked_in_one_chunk():
    """Each program's loop count comes from memory (1, 0, 3, then five 1s) and the loop's ``if`` differs
    between neighbours: both sides run masked to their programs (record/divergence/branches.py), one
    chunk, every program batched; the trace equals one program at a time, row for row."""
    x, n = torch.randn(64), torch.tensor([1, 0, 3, 1, 1, 1, 1, 1], dtype=torch.int32)
    (out_seq, t_seq), (out_bat, t_bat) = run_both(
        lambda o: (lambda out: (trace(_repeat_add, **o)[(8,)](x, n, out, N=8), out)[1])(torch.empty(64)), 8)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 8 and ex["diverged_chunks"] == 0 and not ex["fallbacks"], ex
    assert torch.equal(out_seq, out_bat)
    assert_same_traces(t_seq, t_bat)
    want = x.reshape(8, 8) * torch.tensor([(k * (k + 1)) / 2 for k in n.tolist()])[:, None]
    torch.testing.assert_close(out_bat, want.reshape(-1))


def test_divergent_programs_stay_batched_in_runs_that_agree():
    """Where neighbours agree on the branch in long runs (0 four times, then 3 four times, then 1 eight
    times), the chunk runs as its runs of consecutive programs, in launch order, each batched: no side is
    computed for programs that do not take it; the trace equals one program at a time, row for row."""
    x, n = torch.randn(128), torch.tensor([0] * 4 + [3] * 4 + [1] * 8, dtype=torch.int32)
    (out_seq, t_seq), (out_bat, t_bat) = run_both(
        lambda o: (lambda out: (trace(_repeat_add, **o)[(16,)](x, n, out, N=8), out)[1])(torch.empty(128)), 16)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 16 and ex["diverged_chunks"] >= 1 and not ex["fallbacks"], ex
    assert torch.equal(out_seq, out_bat)
    assert_same_traces(t_seq, t_bat)
    want = x.reshape(16, 8) * torch.tensor([(k * (k + 1)) / 2 for k in n.tolist()])[:, None]
    torch.testing.assert_close(out_bat, want.reshape(-1))


@triton.jit
def _chain(x_ptr, n_ptr):
    pid = tl.program_id(0)
    n = tl.load(n_ptr + pid)
    i = 0
    while i < 2:
        if i < n:                # a branch that differs between programs: masked, but programs share x
            v = tl.load(x_ptr + pid)
            tl.store(x_ptr + pid + 1, v + 1.0)
        i += 1


def test_programs_that_read_what_others_wrote_run_one_at_a_time_in_launch_order():
    """Program p reads what program p - 1 wrote, under a branch whose side alternates: the batched chunk
    sees programs sharing written elements, so every program runs alone, in launch order, and the result
    is the sequential one."""
    x, n = torch.zeros(9), torch.tensor([1, 2, 1, 2, 1, 2, 1, 2], dtype=torch.int32)
    triton_trace.reset()
    trace(_chain, batch=8)[(8,)](x, n)
    ex = triton_trace.current_trace().launches[0].meta["execution"]
    assert ex["batched_programs"] == 0
    assert "share elements of 'x_ptr' that one of them writes" in ex["fallbacks"][0]["reason"], ex
    want = torch.zeros(9)
    for p in range(8):
        for _ in range(int(n[p])):
            want[p + 1] = want[p] + 1.0
    assert torch.equal(x, want)


def test_a_special_first_program_leaves_the_rest_batched_and_findings_unchanged():
    """``if pid == 0`` diverges once: program 0 runs alone first, the others batched after it, so what
    depends on launch order (which program a nonfinite report names, whether a NaN was an input) is the
    sequential run's."""
    @triton.jit
    def first_special(x_ptr, out_ptr, N: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * N + tl.arange(0, N)
        v = tl.load(x_ptr + offs)
        if pid == 0:
            v = v * 2.0
        tl.store(x_ptr + offs, v * 3.0)
        tl.store(out_ptr + offs, tl.log(v - 100.0))

    x = torch.rand(64)
    x[0] = float("nan")
    runs = []
    for batch in (False, 8):
        triton_trace.reset()
        xs, out = x.clone(), torch.empty(64)
        trace(first_special, batch=batch)[(8,)](xs, out, N=8)
        runs.append((xs, out, triton_trace.current_trace()))
    (xs1, o1, t1), (xs2, o2, t2) = runs
    assert torch.equal(xs1.nan_to_num(7.0), xs2.nan_to_num(7.0)) and torch.equal(o1.nan_to_num(7.0), o2.nan_to_num(7.0))
    assert_same_traces(t1, t2)
    assert t1.launches[0].meta.get("nonfinite") == t2.launches[0].meta.get("nonfinite")
    ex = t2.launches[0].meta["execution"]
    assert ex["batched_programs"] == 7 and ex["diverged_chunks"] == 1


def test_lock_kernel_stays_correct():
    """Layer-norm backward's spin lock: the programs that find their lock taken diverge at the ``while``
    from those that take it, so each chunk runs as runs of programs that agree, in launch order (or falls
    back where a run's programs share what they write); the outputs are those of one program at a time."""
    triton_trace.reset()
    torch.manual_seed(0)
    dx, dw, db, *_ = layer_norm_fwd_bwd({"batch": True})
    dx_lc = triton_trace.current_trace().launches[1]
    ex = dx_lc.meta["execution"]
    assert dx_lc.completed and (ex["fallbacks"] or ex["diverged_chunks"])
    triton_trace.reset()
    torch.manual_seed(0)
    dx1, dw1, db1, *_ = layer_norm_fwd_bwd({"batch": False})
    assert torch.equal(dx, dx1) and torch.equal(dw, dw1) and torch.equal(db, db1)


def test_report_says_which_programs_ran_one_at_a_time():
    triton_trace.reset()
    trace(_chain, batch=8)[(8,)](torch.zeros(9), torch.tensor([1, 2] * 4, dtype=torch.int32))
    rep = triton_trace.analyze(triton_trace.current_trace())
    assert "8 program(s) ran one at a time instead of batched (programs of one chunk share elements of 'x_ptr'" \
        in rep.summary()
    assert rep.to_dict()["launches"][0]["execution"]["fallbacks"][0]["programs"] >= 1


def test_memory_limit_drops_values_then_programs_and_says_so():
    x, y = torch.randn(1 << 16), torch.randn(1 << 16)
    triton_trace.reset()
    out = K.add(x, y, kernel=trace(memory_limit=300_000)(K.make_add()), block=256)
    assert torch.equal(out, x + y)                     # every program still ran
    lc = triton_trace.current_trace().launches[0]
    notes = lc.meta["execution"]["limit_notes"]
    assert lc.values_truncated and notes[0].startswith("memory_limit: values dropped")
    assert lc.lanes.nbytes + lc.values.nbytes <= 300_000
    triton_trace.reset()
    K.add(x, y, kernel=trace(memory_limit=2_000, batch=8)(K.make_add()), block=256)
    lc = triton_trace.current_trace().launches[0]
    assert lc.skipped_programs > 0 and lc.recorded_programs + lc.skipped_programs == 256
    assert any("ran without being recorded" in n for n in lc.meta["execution"]["limit_notes"])
    with pytest.raises(triton_trace.TraceUsageError, match="memory_limit"):
        trace(memory_limit="lots")


def test_a_chunk_whose_programs_share_written_memory_is_undone_and_rerun():
    # program p reads x[32p + 1 ...], part of which program p + 1 overwrites. Whether lockstep happens to
    # agree with one-by-one here does not matter: elements one program writes and another touches always
    # send the chunk back to one-by-one execution, and the result is the sequential one.
    case = next(c for c in B.CASES if c.name == "in_place_stencil")
    seq, bat = _broken_run(case, case.broken, 1), _broken_run(case, case.broken, 4)
    assert_same_traces(seq, bat)
    fb = bat.launches[0].meta["execution"]["fallbacks"]
    assert fb and "share elements of 'x'" in fb[0]["reason"]
    x = torch.arange(64, dtype=torch.float32)
    out = x.clone()
    triton_trace.reset()
    case.broken[(2,)](out, 64, BLOCK=32)
    want = x.clone()
    want[:63] = x[1:]
    assert torch.equal(out, want)


def test_overlap_primitives_against_a_direct_count():
    from triton_trace.model.overlap import ranges_disjoint, shared_elements
    rng = np.random.default_rng(0)
    el = rng.integers(0, 50, 400)
    prog = rng.integers(0, 7, 400)
    want = np.zeros(50, bool)
    for e in range(50):
        want[e] = len(set(prog[el == e])) > 1
    np.testing.assert_array_equal(shared_elements(el, prog, 50), want)
    assert ranges_disjoint(np.array([0, 10, 5]), np.array([4, 12, 9]))
    assert not ranges_disjoint(np.array([0, 10, 4]), np.array([4, 12, 9]))
    assert ranges_disjoint(np.array([0, 3, 9]), np.array([2, 2, 9]))       # program 1 touched nothing


def test_program_filter_and_value_options_give_the_same_trace_batched():
    x, y = torch.randn(2000), torch.randn(2000)
    runs = []
    for batch in (False, 5):
        triton_trace.reset()
        K.add(x, y, kernel=trace(batch=batch, programs=lambda p: p[0] % 3 == 1, values=False)(K.make_add()),
              block=64)
        runs.append(triton_trace.current_trace())
    assert_same_traces(*runs)
    assert runs[1].launches[0].meta["execution"]["batched_programs"] == 32


@pytest.mark.parametrize("bad", [0, -3, "yes", 2.5])
def test_bad_batch_option_is_refused(bad):
    with pytest.raises(triton_trace.TraceUsageError, match="batch"):
        trace(batch=bad)


def test_lock_groups_batch_as_runs_that_take_their_locks():
    # programs i and i + 8 share a lock: in a chunk of 32, programs 8.. find their lock taken and spin
    # (divergent): the chunk runs as runs of 8 programs that each take free locks, every program batched
    torch.manual_seed(0)
    M, N, G = 64, 40, 8
    x, dy, w, b = torch.randn(M, N), torch.randn(M, N), torch.randn(N), torch.randn(N)
    _, mean, rstd = K.layer_norm_fwd(x, w, b, kernel=trace(K.make_layer_norm_fwd()), block=64)
    triton_trace.reset()
    dx, dw, db, *_ = K.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=G,
                                      dx_kernel=trace(batch=32)(K.make_layer_norm_bwd_dx()),
                                      dwdb_kernel=trace(K.make_layer_norm_bwd_dwdb()))
    ex = triton_trace.current_trace().launches[0].meta["execution"]
    assert ex["batched_programs"] == 64 and ex["fallbacks"] == [] and ex["diverged_chunks"] >= 2
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    torch.nn.functional.layer_norm(xr, (N,), wr, br, 1e-5).backward(dy)
    for got, want in ((dx, xr.grad), (dw, wr.grad), (db, br.grad)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@triton.jit
def _tile_inc_kernel(x_ptr, n, HALO: tl.constexpr, BLOCK: tl.constexpr):
    # in place, x[tile] += 1 on 2-D tiles of an n x n matrix; HALO reads the next tile's first row too
    pm, pn = tl.program_id(0), tl.program_id(1)
    rows = pm * BLOCK + tl.arange(0, BLOCK)
    cols = pn * BLOCK + tl.arange(0, BLOCK)
    ptr = x_ptr + rows[:, None] * n + cols[None, :]
    v = tl.load(ptr) + tl.load(ptr + HALO * n, mask=(rows[:, None] + HALO) < n, other=0.) * 0
    tl.store(ptr, v + 1)


def _tile_inc(halo, batch):
    x = torch.zeros(64, 64)
    triton_trace.reset()
    trace(batch=batch)(_tile_inc_kernel)[(4, 4)](x, 64, HALO=halo, BLOCK=16)
    return x, triton_trace.current_trace()


def test_loads_of_unwritten_storages_keep_ranges_and_the_chunk_reruns_when_it_writes_them(monkeypatch):
    """Loads of a storage nothing has written are kept as per-program ranges only (read-only inputs never
    need their lanes); a chunk that then writes it, with overlapping ranges, runs batched again with the
    lanes kept: tiles updated in place batch without falling back, and tiles that read a neighbour's
    rows fall back. Both give the sequential result."""
    from triton_trace.record.batch import check as shadow
    kept = []
    add = shadow.ChunkConflicts.add
    monkeypatch.setattr(shadow.ChunkConflicts, "add", lambda self, t, o, s, w, eb, *rest, **kw: (
        kept.append((self.memory.tensors[t].name, w, self.memory.storages[self.memory.storage_of(t)].written)),
        add(self, t, o, s, w, eb, *rest, **kw))[1])
    for halo in (0, 16):
        seq_x, seq = _tile_inc(halo, False)
        kept.clear()
        bat_x, bat = _tile_inc(halo, True)
        assert torch.equal(seq_x, bat_x) and torch.equal(bat_x, torch.ones(64, 64))
        assert_same_traces(seq, bat)
        ex = bat.launches[0].meta["execution"]
        if halo == 0:
            assert ex["batched_programs"] == 16 and not ex["fallbacks"]
            # first attempt: x's loads as ranges; the retry keeps them (x is marked written by then)
            assert ("x_ptr", False, False) in kept and ("x_ptr", False, True) in kept
        else:
            assert ex["fallbacks"] and "share elements of 'x_ptr'" in ex["fallbacks"][0]["reason"]
    entries = []
    check = shadow.ChunkConflicts.check
    monkeypatch.setattr(shadow.ChunkConflicts, "check", lambda self: (
        entries.extend(e for es in self._by_storage.values() for e in es), check(self))[1])
    K.matmul(torch.randn(64, 64), torch.randn(64, 64), kernel=trace(K.make_matmul()), block_m=16, block_n=16)
    loads = [e for e in entries if not e[2]]
    assert loads and all(e[0] is None for e in loads), "matmul's inputs are kept as ranges, not lanes"
    assert any(e[2] and e[0] is not None for e in entries), "its stores keep their lanes"


def test_numpy_sums_each_row_of_contiguous_data_as_it_sums_the_row_alone():
    """reduce_apply sums a chunk's float rows in one call when the reduction runs along the last axis of
    contiguous data, relying on numpy summing each row exactly as it sums that row alone (one pairwise
    sum per row). A numpy that changed this would change batched results: checked here, bit for bit."""
    rng = np.random.default_rng(0)
    for n in (1, 7, 8, 9, 127, 128, 129, 1000, 4096, 8193):
        for dtype in (np.float16, np.float32, np.float64):
            x = (rng.standard_normal((5, 3, n)) * 100).astype(dtype)
            rows = np.stack([np.sum(x[p], axis=-1) for p in range(5)])
            assert rows.tobytes() == np.sum(x, axis=-1).tobytes(), (n, dtype)


@pytest.mark.parametrize("block, batch, want", [(64, True, [256, 1024, 512]),
                                                (64, 128, [128] * 6),
                                                (4096, True, [256, 64])])
def test_the_default_chunk_grows_for_small_blocks(block, batch, want, monkeypatch):
    """batch=True: after its first chunk, a kernel whose memory ops move few lanes per program runs chunks of
    up to MAX_CHUNK programs (fewer, larger numpy passes); wide blocks and an explicit size keep theirs. The
    trace is the one program at a time gives."""
    import kernels as K
    from triton_trace.record import executor
    sizes = []
    real = executor._run_batched

    def spy(kernel, batched_args, call_args, pids, *rest):
        sizes.append(len(pids))
        return real(kernel, batched_args, call_args, pids, *rest)
    monkeypatch.setattr(executor, "_run_batched", spy)
    n = sum(want) * block
    x, y = torch.randn(n), torch.randn(n)
    (o1, t1), (o2, t2) = run_both(lambda o: K.add(x, y, kernel=trace(**o)(K.make_add()), block=block), batch)
    assert sizes == want
    assert torch.equal(o1, x + y) and torch.equal(o1, o2)
    assert_same_traces(t1, t2)


@triton.jit
def _serialized_add(data, lock):
    # one program at a time in the critical section: a chunk splits into its first program and the rest,
    # again and again (triton's test_atomic_cas)
    ptrs = data + tl.arange(0, 16)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.atomic_xchg(lock, 0)


@pytest.mark.parametrize("batch", [True, 1500])
def test_a_spin_lock_splits_a_large_chunk_without_recursing(batch, monkeypatch):
    """Each split of a diverged chunk runs as its own chunk: stepped, not recursed into, so a chunk longer than
    Python's recursion limit splits 1500 times over; the default chunk does not grow for programs that
    diverge."""
    from triton_trace.record import executor
    sizes = []
    real = executor._run_batched
    monkeypatch.setattr(executor, "_run_batched", lambda k, b, c, pids, *rest: sizes.append(len(pids)) or
                        real(k, b, c, pids, *rest))
    data, lock = torch.zeros(16), torch.zeros(1, dtype=torch.int32)
    triton_trace.reset()
    trace(_serialized_add, batch=batch)[(1500,)](data, lock)
    assert max(sizes) == (256 if batch is True else 1500)
    assert torch.equal(data, torch.full((16,), 1500.0)) and int(lock) == 0
    ex = triton_trace.current_trace().launches[0].meta["execution"]
    assert ex["diverged_chunks"] > 0


@triton.jit
def _shared_atomics(x_ptr, totals_ptr, bins_ptr, next_ptr, order_ptr, N: tl.constexpr):
    """Programs share a float accumulator per pid % 3 (whose bits depend on the order of the adds), a
    two-bin float histogram fed lane by lane, and a counter that hands each program a slot."""
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * N + tl.arange(0, N))
    tl.atomic_add(totals_ptr + pid % 3, tl.sum(x))
    tl.atomic_add(bins_ptr + tl.arange(0, N) % 2, x * 1e-3 + 1e4)
    slot = tl.atomic_add(next_ptr, 1)
    tl.store(order_ptr + slot, pid)


@triton.jit
def _two_adds(x_ptr, total_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * N + tl.arange(0, N))
    tl.atomic_add(total_ptr, tl.sum(x))
    tl.atomic_add(total_ptr, tl.max(x))


def test_one_atomic_op_shared_by_the_programs_runs_batched():
    """One atomic op per storage: the interpreter applies it lane by lane, program after program, as a
    sequential run does: values (to the bit), the slots handed out and the trace are those of one program at
    a time, and the chunk is not split. Two atomic ops on one storage interleave differently batched: those
    programs run one at a time."""
    x = torch.randn(40 * 16)

    def shared(o):
        outs = (torch.zeros(3), torch.zeros(2), torch.zeros(1, dtype=torch.int32), torch.full((40,), -1, dtype=torch.int32))
        trace(_shared_atomics, **o)[(40,)](x, *outs, N=16)
        return outs
    (seq, t_seq), (bat, t_bat) = run_both(shared, 64)
    for a, b in zip(seq, bat):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    assert torch.equal(bat[3], torch.arange(40, dtype=torch.int32))
    want = torch.zeros(3, dtype=torch.float64)
    for p in range(40):             # float32 adds in program order
        want[p % 3] = float(torch.tensor(float(want[p % 3]), dtype=torch.float32) + x[p * 16:(p + 1) * 16].sum())
    assert torch.allclose(bat[0].double(), want, rtol=0, atol=1e-4)
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 40 and not ex["fallbacks"], ex

    def two(o):
        out = torch.zeros(1)
        trace(_two_adds, **o)[(40,)](x, out, N=16)
        return out
    (seq, t_seq), (bat, t_bat) = run_both(two, 64)
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert "share elements of 'total_ptr'" in ex["fallbacks"][0]["reason"], ex


@triton.jit
def _racing_store(x_ptr, out_ptr, HOW: tl.constexpr, BLOCK: tl.constexpr):
    """Every program writes its own values over one shared block (the race a missing ``pid * BLOCK``
    makes): a contiguous block, a permuted one, or a block cut by a per-program mask."""
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + pid * BLOCK + lanes)
    if HOW == 0:
        tl.store(out_ptr + lanes, v)
    elif HOW == 1:
        tl.store(out_ptr + (lanes * 5) % BLOCK, v)
    else:
        tl.store(out_ptr + lanes, v, mask=lanes < 3 + (pid * 7) % BLOCK)


@pytest.mark.parametrize("how", [0, 1, 2])
def test_programs_that_race_on_one_store_run_batched_and_leave_the_sequential_values(how):
    """One plain store is all the programs do to the shared block: batched, each lane keeps the value of
    the last program that wrote it, as one program at a time leaves it (bit for bit, whole trace); no chunk
    falls back, and the analysis reports the same race both ways."""
    x = torch.randn(64 * 32)

    def racing(o):
        out = torch.full((32,), -1.0)
        trace(_racing_store, **o)[(64,)](x, out, HOW=how, BLOCK=32)
        return out
    (seq, t_seq), (bat, t_bat) = run_both(racing, True)
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    last = x.view(64, 32)[63]
    if how == 0:
        assert torch.equal(bat, last)
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 64 and not ex["fallbacks"], ex
    races = [[f.to_dict() for f in triton_trace.analyze(t).findings if f.kind == "race"] for t in (t_seq, t_bat)]
    assert races[0] == races[1] and races[0]


@triton.jit
def _tile_sum(x_ptr, out_ptr, M, N, KEEP_ROWS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # per program one BM x BN tile of x; 2-D masks made as kernels make them, from a row and a column bound:
    # full tiles and, at the edges, tiles cut along rows, columns or both; masked lanes read 1.5
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rows_in, cols_in = rm[:, None] < M, rn[None, :] < N
    keep = rows_in & cols_in
    if KEEP_ROWS:      # a row mask or'ed with an all-false one: itself
        keep = keep & (rows_in | (rn[None, :] < 0))
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=keep, other=1.5)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x * 2, mask=keep)
    tl.store(out_ptr + M * N + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), tl.sum(x))


@pytest.mark.parametrize("keep_rows", [False, True])
@pytest.mark.parametrize("shape", [(64, 96), (70, 96), (64, 100), (70, 100)], ids=str)
def test_masks_and_ed_with_an_all_true_side_load_and_record_what_one_program_at_a_time_does(shape, keep_rows):
    """A mask and'ed with a side that is all true (a full tile's row or column bound) is the other side as it
    is, broadcast (batch/chunk.py); tiles cut at the edges and masked lanes' ``other`` must not notice."""
    M, N = shape
    BM, BN = 16, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    x = torch.randn(M, N)

    def run(o):
        out = torch.zeros(M * N + grid[0] * grid[1])
        trace(_tile_sum, **o)[grid](x, out, M, N, KEEP_ROWS=keep_rows, BM=BM, BN=BN)
        return out
    (seq, t_seq), (bat, t_bat) = run_both(run, 64)
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    assert torch.equal(bat[:M * N].view(M, N), x * 2)
    padded = torch.full((grid[0] * BM, grid[1] * BN), 1.5)
    padded[:M, :N] = x
    tiles = padded.view(grid[0], BM, grid[1], BN).sum(dim=(1, 3), dtype=torch.float64).reshape(-1)
    torch.testing.assert_close(bat[M * N:].double(), tiles, rtol=1e-5, atol=1e-4)
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == grid[0] * grid[1] and not ex["fallbacks"], ex
    # the recorded masks, against the bounds computed here
    active = sum(int(np.asarray(a.mask).sum()) for a in t_bat.launches[0].accesses() if a.kind == "load")
    assert active == M * N


@triton.jit
def _stores_that_overlap(x_ptr, out_ptr, n, HOW: tl.constexpr, BLOCK: tl.constexpr):
    """Two or more stores whose blocks overlap the next program's (offsets off by half a block): a plain
    overlap, a masked loop of three stores whose trip counts differ by program, or a load of the stored
    block (an in-place update: the chunk must run one program at a time)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    if HOW == 0:
        tl.store(out_ptr + offs, v)
        tl.store(out_ptr + offs + BLOCK // 2, v * 2, mask=offs + BLOCK // 2 < n)
    elif HOW == 1:
        for i in range(pid % 3 + 1):
            tl.store(out_ptr + offs + i * (BLOCK // 4), v + i, mask=offs + i * (BLOCK // 4) < n)
    else:
        tl.store(out_ptr + offs, v)
        w = tl.load(out_ptr + offs + BLOCK // 2, mask=offs + BLOCK // 2 < n, other=0.0)
        tl.store(out_ptr + offs + BLOCK // 2, v + w, mask=offs + BLOCK // 2 < n)


def _overlapping(how, programs=48, block=32):
    x = torch.randn(programs * block)

    def run(o):
        out = torch.full((programs * block,), -1.0)
        trace(_stores_that_overlap, **o)[(programs,)](x, out, x.numel(), HOW=how, BLOCK=block)
        return out
    return run


@pytest.mark.parametrize("how", [0, 1])
def test_stores_of_different_ops_that_programs_share_stay_batched_with_the_sequential_values(how):
    """Programs whose stores (two ops, or one op on several trips of a masked loop) overlap their
    neighbours': the chunk stays batched, and each shared element ends with its sequentially last writer's
    value (program, then op), bit for bit, with the same trace and findings."""
    (seq, t_seq), (bat, t_bat) = run_both(_overlapping(how), True)
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    assert_same_traces(t_seq, t_bat)
    ex = t_bat.launches[0].meta["execution"]
    assert ex["batched_programs"] == 48 and not ex["fallbacks"], ex
    found = [sorted((f.kind, f.line) for f in triton_trace.analyze(t).findings) for t in (t_seq, t_bat)]
    assert found[0] == found[1] and any(k == "race" for k, _ in found[0])


def test_without_the_fix_up_the_batched_values_differ(monkeypatch):
    """The check above can fail: op after op, the chunk leaves the last op's value on a shared element, not
    the last program's."""
    from triton_trace.record.batch import check as chunkcheck
    (seq, _), _ = run_both(_overlapping(0), True)
    monkeypatch.setattr(chunkcheck.ChunkConflicts, "_fix_up", lambda self, sid, accesses, shared: True)
    triton_trace.reset()
    bat = _overlapping(0)({"batch": True})
    assert not torch.equal(seq, bat)


def test_a_storage_the_chunk_also_reads_still_runs_one_program_at_a_time():
    (seq, t_seq), (bat, t_bat) = run_both(_overlapping(2), True)
    assert seq.numpy().tobytes() == bat.numpy().tobytes()
    assert_same_traces(t_seq, t_bat)
    fb = t_bat.launches[0].meta["execution"]["fallbacks"]
    assert fb and "share elements of 'out_ptr'" in fb[0]["reason"]
