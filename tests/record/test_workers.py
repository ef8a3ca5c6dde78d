"""``trace(workers=...)``: a launch's programs in forked worker processes, recorded as one process records
them (record/parallel/). Every case runs with ``workers=1`` and ``workers=2`` on the same inputs and compares
the outputs to the bit, the whole launch (every op row, lane, mask and value, the checks' records, the meta
but for the workers note itself), the findings and the analysis' numbers. Launches here are small, so
workers are made to cost nothing (plan.py's cost model); chunks are small for the same reason, so a launch
has several to share out."""
import dataclasses

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import ProgramError, TraceUsageError, trace
from triton_trace.model import Launch
from triton_trace.model.lanes.writer import LaneWriter
from triton_trace.record.parallel import plan
import kernels as K


def _unmerged() -> list:
    """Runtime checks (checks/table.py) with no merge of a worker's part: a worker whose programs changed
    the state of one of them runs again in the launch's process (exact, but no worker is kept)."""
    from triton_trace.record.checks import table
    from triton_trace.record.checks.monitor import Monitor
    out = []
    for row in table.MONITORS:
        cls = table.resolve(row.monitor)
        if next(k for k in cls.__mro__ if "merge" in vars(k)) is Monitor:
            out.append(row.name)
    return out


def test_every_check_merges_a_workers_part():
    """A check without fork_point/since/mergeable/merge (checks/monitor.py) turns workers off in practice
    wherever it notes anything: every launch's programs then run in one process. The float64 shadow
    (checks/shadow.py) is opt-in: off, it notes nothing, and workers stay."""
    assert _unmerged() in ([], ["shadow"]), f"no merge of a worker's part: {_unmerged()}"


@pytest.fixture(autouse=True)
def _fork_any_launch(monkeypatch):
    """Workers cost nothing: every launch of more than one chunk is split, as many ways as asked."""
    monkeypatch.setattr(plan, "WORKER_COST", 1.0)
    monkeypatch.setattr(plan, "FIXED_SECONDS", 0.0)
    monkeypatch.setattr(plan, "FORK_SECONDS", 0.0)


def _without_workers(meta: dict) -> dict:
    ex = {k: v for k, v in meta.get("execution", {}).items() if k != "workers"}
    return {**meta, "execution": ex}


def assert_same_launch(a: Launch, b: Launch) -> None:
    for f in dataclasses.fields(Launch):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "meta":
            assert _without_workers(x) == _without_workers(y)
        elif f.name == "tensors":         # (``buffer`` numbers each live storage of the process: fresh outputs)
            assert [dataclasses.replace(t, buffer=-1) for t in x] == [dataclasses.replace(t, buffer=-1) for t in y]
        elif f.name == "ops":
            assert x.keys() == y.keys()
            for col in x:
                np.testing.assert_array_equal(x[col], y[col], err_msg=f"ops column {col}")
        elif f.name == "lanes":
            ax, ay = x.to_arrays(), y.to_arrays()
            assert ax.keys() == ay.keys() and x.size == y.size
            for name in ax:
                np.testing.assert_array_equal(ax[name], ay[name], err_msg=f"lanes array {name}")
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert (x is None) == (y is None) and (x is None or (x.dtype == y.dtype and x.tobytes() == y.tobytes())), \
                f.name
        else:
            assert x == y, f.name


def _bits(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().contiguous().numpy().tobytes() for o in outs]


def both(run, analyse=True, **options):
    """``run(decorate)`` with workers=1, then 2 (``decorate(jit)`` traces a kernel with ``options``); checks the
    outputs, traces and reports are the same. Returns the workers=2 trace's first launch's workers note."""
    results = []
    for workers in (1, 2):
        triton_trace.reset()
        torch.manual_seed(0)
        out = run(lambda k: trace(k, workers=workers, **options))
        results.append((_bits(out), triton_trace.current_trace()))
    (o1, t1), (o2, t2) = results
    assert o1 == o2
    assert len(t1.launches) == len(t2.launches)
    for a, b in zip(t1.launches, t2.launches):
        assert_same_launch(a, b)
        assert "workers" not in a.meta["execution"]
    if analyse:
        r1, r2 = (triton_trace.analyze(t, layouts="model", what_if=False).to_dict() for t in (t1, t2))
        assert r1["findings"] == r2["findings"]
        assert [lr["metrics"] for lr in r1["launches"]] == [lr["metrics"] for lr in r2["launches"]]
    return t2.launches[0].meta["execution"]["workers"]


# -- the usual kernels: every worker's programs taken ------------------------------------------------------------
def test_vector_add():
    x, y = torch.randn(4000), torch.randn(4000)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), batch=16)
    assert w["asked"] == 2 and w["used"] == 2, w


def test_vector_add_default_chunks_past_the_value_cap():
    """The default chunking (256 programs, then grown), with the value cap reached in the worker's range."""
    x, y = torch.randn(1 << 16), torch.randn(1 << 16)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), values=30000)
    assert w["used"] == 2, w
    assert triton_trace.current_trace().launches[0].values_truncated


def test_softmax():
    x = torch.randn(200, 50)[:, :45]
    w = both(lambda d: K.softmax(x, kernel=d(K.make_softmax())), batch=8)
    assert w["used"] == 2, w


def test_matmul():
    a, b = torch.randn(96, 40), torch.randn(40, 80)
    w = both(lambda d: K.matmul(a, b, kernel=d(K.make_matmul()), block_m=16, block_n=16, block_k=16, group_m=2),
             batch=4)
    assert w["used"] == 2, w


def test_matmul_fp16_values_and_program_filter():
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    w = both(lambda d: K.matmul(a, b, kernel=d(K.make_matmul())), batch=2, programs=lambda p: p[0] % 3 != 1)
    assert w["used"] == 2, w


def test_one_program_at_a_time():
    x, y = torch.randn(600), torch.randn(600)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=8), batch=False)
    assert w["used"] == 2, w


def test_three_workers():
    x, y = torch.randn(4000), torch.randn(4000)
    triton_trace.reset()
    K.add(x, y, kernel=trace(K.make_add(), workers=3, batch=16), block=16)
    assert triton_trace.current_trace().launches[0].meta["execution"]["workers"]["used"] == 3


# -- programs that see each other's effects: the rest runs again in this process ----------------------------------
@triton.jit
def _sum_into_counter(x_ptr, total_ptr, hist_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))
    tl.atomic_add(hist_ptr + (offs % 7), 1.0)


def test_atomics_on_shared_memory_fall_back_and_say_why():
    x = torch.randn(64 * 16)

    def run(d):
        total, hist = torch.zeros(1), torch.zeros(7)
        d(_sum_into_counter)[(64,)](x, total, hist, BLOCK=16)
        return total, hist
    w = both(run, batch=8)
    assert w["used"] == 1 and "atomics" in w["reason"] and "ran again in this process" in w["reason"], w


@triton.jit
def _running_sum(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Program k adds its block to program k-1's last output."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    prev = tl.load(out_ptr + pid * BLOCK - 1, mask=pid > 0, other=0.0)
    tl.store(out_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0) + prev)


@pytest.mark.parametrize("batch", [False, 8])
def test_a_program_reading_its_predecessors_output(batch):
    x = torch.randn(48 * 8)

    def run(d):
        out = torch.zeros_like(x)
        d(_running_sum)[(48,)](x, out, BLOCK=8)
        return out
    w = both(run, batch=batch)
    torch.testing.assert_close(run(lambda k: trace(k, workers=1)), torch.cumsum(x, 0), rtol=1e-5, atol=1e-4)
    assert w["used"] == 1, w
    if batch is False:      # (batched, the chunks themselves fall back first: that is the reason then)
        assert "read elements of 'out_ptr' that an earlier worker's programs write" in w["reason"], w


@triton.jit
def _own_counters(x_ptr, counts_ptr, BLOCK: tl.constexpr):
    """Atomics on each program's own elements: no two programs meet, so workers stay."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(counts_ptr + offs, tl.load(x_ptr + offs))
    tl.atomic_max(counts_ptr + offs, 0.5)


def test_atomics_on_each_programs_own_elements_stay_in_workers():
    x = torch.randn(64 * 16)

    def run(d):
        counts = torch.ones(64 * 16)
        d(_own_counters)[(64,)](x, counts, BLOCK=16)
        return counts
    w = both(run, batch=8)
    assert w["used"] == 2, w


def test_kept_inputs_for_a_reproducer():
    x, y = torch.randn(4000), torch.randn(4000)
    def run(d):
        out = torch.zeros(4000)             # (the bytes kept are those the launch found: no torch.empty garbage)
        d(K.make_add())[(250,)](x, y, out, 4000, BLOCK=16)
        return out
    w = both(run, batch=16, inputs=True)
    assert w["used"] == 2, w
    lc = triton_trace.current_trace().launches[0]
    assert lc.module.inputs.kept and lc.finals is not None


# -- findings, runtime checks, values ---------------------------------------------------------------------------
def test_out_of_bounds_findings():
    x, y = torch.randn(997), torch.randn(997)

    def run(d):
        out = torch.zeros(997)
        d(_add_no_mask)[(125,)](x, y, out, 997, BLOCK=8)
        return out
    w = both(run, batch=8)
    assert w["used"] == 2, w
    report = triton_trace.analyze(triton_trace.current_trace(), layouts="model").to_dict()
    kinds = {f["kind"] for f in report["findings"]}
    assert "out_of_bounds" in kinds


@triton.jit
def _add_no_mask(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) + tl.load(y + offs))


@triton.jit
def _checked_values(x_ptr, d_ptr, big_ptr, out_ptr, idx_ptr, BLOCK: tl.constexpr):
    """A division by zero (nonfinite), an int32 product that wraps (overflow), two lanes storing one address
    with different values (lane conflict): in programs of both workers' ranges."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    d = tl.load(d_ptr + offs)
    tl.store(out_ptr + offs, x / d)
    big = tl.load(big_ptr + offs)
    tl.store(idx_ptr + offs, big * big)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK) // 2, x)


def test_runtime_checks_merge_in_program_order():
    n = 64 * 8
    x = torch.randn(n)
    d = torch.ones(n)
    d[[3, 100, 300, 301, 450]] = 0.0
    big = torch.arange(n, dtype=torch.int32)
    big[[7, 260, 500]] = 100000

    def run(d_):
        out, idx = torch.zeros(n), torch.zeros(n, dtype=torch.int32)
        d_(_checked_values)[(64,)](x, d, big, out, idx, BLOCK=8)
        return out, idx
    w = both(run, batch=8)
    assert w["used"] == 2, w
    meta = triton_trace.current_trace().launches[0].meta
    assert meta.get("nonfinite") and meta.get("overflow") and meta.get("lane_conflict")
    programs = {tuple(r["program"]) for r in meta["nonfinite"]} | {tuple(p) for r in meta["overflow"]
                                                                       for p in r["programs"]}
    assert any(p[0] >= 40 for p in programs)          # something was noted in the worker's range


@pytest.mark.parametrize("cap", [2500, 9000, 11000])
def test_value_cap_reached_in_either_range(cap):
    """250 programs of 48 values: the cap is reached in this process's range (2500) or in the worker's (9000,
    11000), whose values are then kept up to it, as one process keeps them."""
    x, y = torch.randn(4000), torch.randn(4000)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), batch=16, values=cap, analyse=False)
    assert w["used"] == 2
    lc = triton_trace.current_trace().launches[0]
    assert lc.values_truncated and 0 < int((lc.ops["value_dtype"] >= 0).sum()) * 16 <= cap


def test_values_cap_and_memory_limit():
    x, y = torch.randn(4000), torch.randn(4000)
    both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), batch=16, values=2500)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), batch=16, memory_limit="64MB")
    assert w["used"] == 1 and "memory_limit" in w["reason"]


# -- errors, prints, progress -----------------------------------------------------------------------------------
@triton.jit
def _fails_in_program_50(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if pid == 50:
        x = x + tl.zeros([2 * BLOCK], dtype=tl.float32)
    tl.store(out_ptr + offs, x + 1)


def test_a_worker_programs_error_reaches_the_user_as_with_one_worker():
    x = torch.randn(64 * 8)
    seen = []
    for workers in (1, 2):
        triton_trace.reset()
        out = torch.zeros_like(x)
        with pytest.raises(ProgramError) as ei:
            trace(_fails_in_program_50, workers=workers, batch=8)[(64,)](x, out, BLOCK=8)
        e = ei.value
        seen.append((str(e), e.kernel, e.program, e.line, out.numpy().tobytes(), triton_trace.current_trace()))
    (m1, k1, p1, l1, o1, t1), (m2, k2, p2, l2, o2, t2) = seen
    assert (m1, k1, p1, l1, o1) == (m2, k2, p2, l2, o2)
    assert p2 == (50, 0, 0) and k2 == "_fails_in_program_50"
    assert_same_launch(t1.launches[0], t2.launches[0])
    w = t2.launches[0].meta["execution"]["workers"]
    assert w["used"] == 1 and "raised" in w["reason"], w


def test_out_of_bounds_raise_from_a_worker():
    x, y = torch.randn(997), torch.randn(997)
    msgs = []
    for workers in (1, 2):
        triton_trace.reset()
        with pytest.raises(triton_trace.OutOfBoundsAccess) as ei:
            trace(_add_no_mask, workers=workers, batch=False, on_oob="raise")[(125,)](x, y, torch.zeros(997), 997,
                                                                                      BLOCK=8)
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1] and "(124, 0, 0)" in msgs[0]


@triton.jit
def _prints(x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    tl.device_print("sum", tl.sum(x, axis=0))


def test_prints_come_in_program_order(capsys):
    x = torch.arange(40 * 4, dtype=torch.float32)
    printed = []
    for workers in (1, 2):
        triton_trace.reset()
        trace(_prints, workers=workers, batch=8)[(40,)](x, BLOCK=4)
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and printed[0].count("sum") == 40
    assert triton_trace.current_trace().launches[0].meta["execution"]["workers"]["used"] == 2


def test_a_worker_that_dies_without_a_result(monkeypatch):
    import os
    from triton_trace.record.parallel import worker
    monkeypatch.setattr(worker, "_write", lambda fd, part, data: os._exit(3))
    x, y = torch.randn(4000), torch.randn(4000)
    w = both(lambda d: K.add(x, y, kernel=d(K.make_add()), block=16), batch=16, analyse=False)
    assert w["used"] == 1 and "ended without a result" in w["reason"], w


def test_ctrl_c_in_this_process_stops_the_workers():
    """Ctrl-C while this process runs its own range: the workers are stopped and reaped, and the launch keeps
    what this process recorded, as with one worker."""
    import os
    x, y = torch.randn(4000), torch.randn(4000)
    kept = []
    for workers in (1, 2):
        triton_trace.reset()

        def stop(done, total, kernel):
            if done >= 80:
                raise KeyboardInterrupt
        triton_trace.set_progress(stop)
        try:
            with pytest.raises(KeyboardInterrupt):
                K.add(x, y, kernel=trace(K.make_add(), workers=workers, batch=16), block=16)
        finally:
            triton_trace.set_progress(None)
        kept.append(triton_trace.current_trace().launches[0])
    assert not kept[1].completed and kept[1].recorded_programs == kept[0].recorded_programs == 80
    assert_same_launch(dataclasses.replace(kept[0], error=None), dataclasses.replace(kept[1], error=None))
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)                 # no worker left behind


def test_progress_is_told_every_program_once():
    x, y = torch.randn(4000), torch.randn(4000)
    seen = []
    triton_trace.set_progress(lambda done, total, kernel: seen.append((done, total)))
    try:
        K.add(x, y, kernel=trace(K.make_add(), workers=2, batch=16), block=16)
    finally:
        triton_trace.set_progress(None)
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == 250 and seen[-1][1] == 250


def test_trace_all_takes_workers_and_the_option_is_checked():
    x, y = torch.randn(4000), torch.randn(4000)
    with triton_trace.trace_all(workers=2):
        K.add(x, y, kernel=K.make_add(), block=8)
    assert triton_trace.current_trace().launches[0].meta["execution"]["workers"]["asked"] == 2
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(TraceUsageError, match="workers"):
            trace(K.make_add(), workers=bad)


def test_the_default_is_one_process():
    x, y = torch.randn(4000), torch.randn(4000)
    K.add(x, y, kernel=trace(K.make_add(), batch=16), block=16)
    execution = triton_trace.current_trace().launches[0].meta["execution"]
    assert "workers" not in execution, execution            # one process: nothing forked, nothing to say


def test_auto_leaves_busy_cores_alone(monkeypatch):
    monkeypatch.setattr(plan, "cores", lambda: 4)
    monkeypatch.setattr(plan, "idle_cores", lambda cores: 1)
    x, y = torch.randn(4000), torch.randn(4000)
    K.add(x, y, kernel=trace(K.make_add(), batch=16, workers="auto"), block=16)
    w = triton_trace.current_trace().launches[0].meta["execution"]["workers"]
    assert w["asked"] == 4 and w["used"] == 1 and "busy" in w["reason"], w
    monkeypatch.setattr(plan, "idle_cores", lambda cores: 3)
    triton_trace.reset()
    K.add(x, y, kernel=trace(K.make_add(), batch=16, workers="auto"), block=16)
    w = triton_trace.current_trace().launches[0].meta["execution"]["workers"]
    assert w["asked"] == 4 and w["used"] == 3, w


def test_a_short_launch_stays_in_one_process(monkeypatch):
    monkeypatch.setattr(plan, "FIXED_SECONDS", 1000.0)
    x, y = torch.randn(4000), torch.randn(4000)
    K.add(x, y, kernel=trace(K.make_add(), workers=2, batch=16), block=16)
    w = triton_trace.current_trace().launches[0].meta["execution"]["workers"]
    assert w["used"] == 1 and "too little" in w["reason"], w


def test_a_saved_trace_keeps_the_workers_note(tmp_path):
    x, y = torch.randn(4000), torch.randn(4000)
    K.add(x, y, kernel=trace(K.make_add(), workers=2, batch=16), block=16)
    path = tmp_path / "t.ttrace"
    triton_trace.save(triton_trace.current_trace(), str(path))
    lc = triton_trace.load(str(path)).launches[0]
    assert lc.meta["execution"]["workers"]["used"] == 2


# -- the lane store a worker hands back ---------------------------------------------------------------------------
def test_lane_writers_extend_as_one_writer_fed_every_block():
    rng = np.random.default_rng(0)
    for _ in range(200):
        blocks = []
        for _ in range(int(rng.integers(1, 10))):
            rows, n = int(rng.integers(1, 4)), 8
            base = rng.integers(0, 1000, (rows, 1))
            kind = int(rng.integers(0, 3))
            step = [np.arange(n), np.arange(n) * 3, rng.integers(-9, 9, (rows, n))][kind]
            o = base + step
            m = [np.ones((rows, n), bool), np.arange(n)[None] < rng.integers(0, n + 1, (rows, 1)),
                 rng.random((rows, n)) < 0.5][int(rng.integers(0, 3))]
            blocks.append((o.astype(np.int64), m, (8,) if rng.random() < 0.5 else (2, 4)))
        cut = int(rng.integers(0, len(blocks) + 1))
        one, first, second = LaneWriter(), LaneWriter(), LaneWriter()
        for i, (o, m, shape) in enumerate(blocks):
            one.add(o, m, shape=shape)
            (first if i < cut else second).add(o, m, shape=shape)
        first.extend(second)
        a, b = one.finish().to_arrays(), first.finish().to_arrays()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
