"""The values each line's float math produced, per program (record/checks/mathvalues.py): a softmax that
forgets to subtract the row maximum overflows ``tl.exp`` to inf in the rows holding a 100.0, and its division
turns those into NaN. Every count, range and first non-finite lane is compared with numpy on the same inputs,
computed here lane by lane as the kernel's lines define them; batched and one program at a time agree; a
masked loop's programs count their own trips; the caps say what they left out; the record survives a file
and a damaged one is refused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import TraceFileError
from triton_trace.record.checks import mathvalues
from triton_trace.record.parallel import plan
from triton_trace.store import tracefile as store

ROWS, N, BLOCK = 6, 50, 64
HOT = {1: [3], 4: [10, 20]}          # row -> columns holding 100.0: exp(100) overflows float32


@triton.jit
def _naive_softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    ramp = offs.to(tl.float32) * 0.5                                    # RAMP: the same in every program
    num = tl.exp(x)                                                     # EXP
    y = num / tl.sum(num, axis=0)                                       # DIV
    tl.store(y_ptr + row * n + offs, y + ramp * 0.0, mask=offs < n)     # ADD


def _line(marker: str) -> int:
    import inspect
    src, first = inspect.getsourcelines(_naive_softmax.fn)
    return first + next(k for k, text in enumerate(src) if f"# {marker}" in text)


def _inputs() -> torch.Tensor:
    torch.manual_seed(1)
    x = torch.randn(ROWS, N)
    for r, cols in HOT.items():
        x[r, cols] = 100.0
    return x


def _run(**options):
    x = _inputs()
    y = torch.empty(ROWS, N)
    triton_trace.trace(**options)(_naive_softmax)[(ROWS,)](x, y, N, BLOCK=BLOCK)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace, x, y


def _by_line(launch) -> dict:
    return {e["line"]: e for e in launch.meta["math_values"]}


def _expected() -> dict:
    """line -> per program (row) the float32 results of that line's ops, every lane of the block."""
    x = np.zeros((ROWS, BLOCK), np.float32)
    x[:, :N] = _inputs().numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.exp(x)
        den = num.sum(axis=1, dtype=np.float32, keepdims=True)
        y = num / den
        ramp = np.broadcast_to(np.arange(BLOCK, dtype=np.float32) * 0.5, (ROWS, BLOCK))
        # the ADD line: ramp * 0.0, then y + that (two results per lane)
        add = np.concatenate([ramp * np.float32(0.0), y + ramp * np.float32(0.0)], axis=1)
        # the RAMP line: the conversion to float32 (a result too), then the product
        cast = np.broadcast_to(np.arange(BLOCK, dtype=np.float32), (ROWS, BLOCK))
    return {_line("RAMP"): np.concatenate([cast, ramp], axis=1), _line("EXP"): num, _line("DIV"): y,
            _line("ADD"): add}


def _check_against_numpy(entry: dict, want: np.ndarray, exact_range: bool = True) -> None:
    assert entry["p_program"] == [[r, 0, 0] for r in range(ROWS)]
    finite = np.isfinite(want)
    assert entry["p_count"] == [want.shape[1]] * ROWS
    assert entry["p_nan"] == np.isnan(want).sum(axis=1).tolist()
    assert entry["p_pinf"] == (want == np.inf).sum(axis=1).tolist()
    assert entry["p_ninf"] == (want == -np.inf).sum(axis=1).tolist()
    lo = [float(w[f].min()) if f.any() else 0.0 for w, f in zip(want, finite)]
    hi = [float(w[f].max()) if f.any() else 0.0 for w, f in zip(want, finite)]
    tol = 0 if exact_range else 1e-6        # (a sum's order may differ from numpy's: the last bits of a quotient)
    np.testing.assert_allclose(entry["p_min"], lo, rtol=tol, atol=tol)
    np.testing.assert_allclose(entry["p_max"], hi, rtol=tol, atol=tol)
    first = [int(np.argmax(~f)) if not f.all() else -1 for f in finite]
    assert entry["p_lane"] == [k % BLOCK if k >= 0 else -1 for k in first]     # (the lane in its op's block)
    kind = [0 if k < 0 else 1 if np.isnan(w[k]) else 2 if w[k] > 0 else 3 for w, k in zip(want, first)]
    assert entry["p_kind"] == kind
    assert entry["count"] == want.size and entry["nan"] == int(np.isnan(want).sum())
    assert entry["pinf"] == int((want == np.inf).sum()) and entry["programs"] == ROWS and entry["left_out"] == 0


@pytest.mark.parametrize("batch", [True, False])
def test_each_lines_results_per_program_match_numpy(batch):
    """(Batched, the NaN stored sends the chunk back to run again checking every op (checks/nonfinite.py): a
    count that was not undone with it would be twice numpy's.)"""
    trace, _, y = _run(batch=batch)
    lines, want = _by_line(trace.launches[0]), _expected()
    assert set(lines) == set(want)
    for ln, w in want.items():
        _check_against_numpy(lines[ln], w, exact_range=ln != _line("DIV"))
    exp, div = lines[_line("EXP")], lines[_line("DIV")]
    assert exp["ops"] == ["exp"] and exp["shapes"] == [[BLOCK]]
    assert exp["first"] == {"program": [1, 0, 0], "lane": [3], "op": "exp", "value": "inf"}
    assert div["first"] == {"program": [1, 0, 0], "lane": [3], "op": "true_divide", "value": "nan"} or \
        div["first"]["op"] in ("divide", "div", "fdiv") and div["first"]["lane"] == [3]
    # the kernel's output agrees: NaN exactly where the division made one
    assert torch.isnan(y).sum().item() == sum(len(c) for c in HOT.values())


def test_batched_equals_one_program_at_a_time():
    a, _, _ = _run(batch=True)
    b, _, _ = _run(batch=False)
    assert a.launches[0].meta["math_values"] == b.launches[0].meta["math_values"]


@triton.jit
def _trips(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(pid + 1):                 # a trip count of its own per program: a masked loop when batched
        acc += x * i                                                     # TRIP
    tl.store(y_ptr + pid * BLOCK + offs, acc)


@pytest.mark.parametrize("batch", [True, False])
def test_a_masked_loop_counts_each_programs_own_trips(batch):
    P, B = 5, 8
    x = torch.arange(B, dtype=torch.float32) + 1.0
    triton_trace.trace(batch=batch)(_trips)[(P,)](x, torch.empty(P * B), BLOCK=B)
    import inspect
    src, first = inspect.getsourcelines(_trips.fn)
    trip = first + next(k for k, t in enumerate(src) if "# TRIP" in t)
    e = {e["line"]: e for e in triton_trace.current_trace().launches[0].meta["math_values"]}[trip]
    xs = x.numpy()
    for p, (count, lo, hi) in enumerate(zip(e["p_count"], e["p_min"], e["p_max"])):
        # trip i: x * i, then acc + x * i (acc after it: x * (0 + .. + i))
        res = np.concatenate([np.concatenate([xs * i, xs * (i * (i + 1) // 2)]) for i in range(p + 1)])
        assert (count, lo, hi) == (res.size, res.min(), res.max()), p
    assert e["p_program"] == [[p, 0, 0] for p in range(P)]


def test_past_the_cap_a_line_keeps_its_totals_and_says_so(monkeypatch):
    monkeypatch.setattr(mathvalues, "MAX_ENTRIES", 9)
    trace, _, _ = _run(batch=False)
    lines, want = _by_line(trace.launches[0]), _expected()
    order = sorted(want)                      # one program at a time: each program's lines in order
    kept = {ln: len(lines[ln]["p_program"]) for ln in order}
    assert sum(kept.values()) == 9
    for ln in order:
        e = lines[ln]
        assert e["left_out"] == ROWS - kept[ln] and e["programs"] == ROWS
        assert e["count"] == want[ln].size and e["pinf"] == int((want[ln] == np.inf).sum())   # totals: all
        assert e["p_program"] == [[r, 0, 0] for r in range(kept[ln])]       # the first programs, in order


def test_a_workers_programs_merge_as_one_process_records_them(monkeypatch):
    monkeypatch.setattr(plan, "WORKER_COST", 1.0)
    monkeypatch.setattr(plan, "FIXED_SECONDS", 0.0)
    monkeypatch.setattr(plan, "FORK_SECONDS", 0.0)
    one, _, _ = _run(batch=2, workers=1)
    two, _, _ = _run(batch=2, workers=2)
    assert two.launches[0].meta["execution"]["workers"]["used"] == 2
    assert one.launches[0].meta["math_values"] == two.launches[0].meta["math_values"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    trace, _, _ = _run(batch=True)
    path = tmp_path_factory.mktemp("mathvalues") / "softmax.ttrace"
    trace.save(path)
    return trace, path


def test_the_record_survives_a_trace_file(saved):
    trace, path = saved
    loaded = triton_trace.load(path).launches[0].meta["math_values"]
    assert loaded == json.loads(json.dumps(trace.launches[0].meta["math_values"]))


def _rewrite(path, out, damage):
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[12:20], "little")
    header, blobs = json.loads(raw[20:20 + hlen]), raw[20 + hlen:]
    damage(header["launches"][0]["meta"]["math_values"])
    h = json.dumps(header).encode()
    out.write_bytes(store.MAGIC + store.VERSION.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h + blobs)


DAMAGE = [
    ("a minimum that is text", lambda mv: mv[0]["p_min"].__setitem__(0, "1e9"), r"math_values\[0\]\.p_min"),
    ("a negative count", lambda mv: mv[0]["p_nan"].__setitem__(0, -4), r"math_values\[0\]\.p_nan"),
    ("a program of two numbers", lambda mv: mv[0]["p_program"].__setitem__(0, [1, 2]), r"math_values\[0\]\.p_program"),
    ("a first that is code", lambda mv: mv[1].__setitem__("first", {"op": {"run": 1}}), r"math_values\[1\]\.first"),
    ("an unknown field", lambda mv: mv[0].__setitem__("eval", "x"), r"math_values\[0\] has unknown keys \['eval'\]"),
    ("more programs than kept", lambda mv: mv[0].__setitem__("p_lane", [0] * (mathvalues.MAX_ENTRIES + 1)),
     r"math_values\[0\]\.p_lane"),
]


@pytest.mark.parametrize("what,damage,match", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_record_is_refused_on_load(saved, tmp_path, what, damage, match):
    path = tmp_path / "damaged.ttrace"
    _rewrite(saved[1], path, damage)
    with pytest.raises(TraceFileError, match=match):
        triton_trace.load(path)


def test_the_hooks_can_be_turned_off(monkeypatch):
    from triton_trace.record.checks import mathvalues_ops
    monkeypatch.setenv(mathvalues_ops.ENV, "0")
    trace, _, y = _run(batch=True)
    assert "math_values" not in trace.launches[0].meta
    assert torch.isnan(y).sum().item() == sum(len(c) for c in HOT.values())      # the kernel ran as before
