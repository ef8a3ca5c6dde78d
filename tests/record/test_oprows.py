"""The ops table's rows (record/oprows.py): one per (event, program that ran it), program by program in the
order a sequential run records them. Chunks whose programs all ran every event are laid out directly; the
rest are sorted. Both must give the order worked out here by hand, row by row."""
import numpy as np
import pytest

from triton_trace.record import oprows
from triton_trace.record.oprows import Event, op_rows


def _event(chunk, lanes=4, rows=None):
    e = Event(chunk, 0, 1, 0, 10 + chunk, 0, 4, (lanes,), 0, lanes, (0, 0, 0))
    e.rows = rows
    return e


def _by_hand(events, chunk_pids):
    """(program id, event index, seq) in the order a sequential run records them."""
    out = []
    for c, pids in enumerate(chunk_pids):
        mine = [i for i, e in enumerate(events) if e.chunk == c]
        for p in range(len(pids)):
            ran = [i for i in mine if events[i].rows is None or events[i].rows[p]]
            out += [(int(pids[p][0]), i, s) for s, i in enumerate(ran)]
    return out


def _table(events, chunk_pids):
    for k, e in enumerate(events):        # each event's lanes and values follow the previous ones'
        e.lane_start = 1000 * k
    ops = op_rows(events, chunk_pids)
    lane_event = ops["lane_start"] // 1000
    return [(int(p), int(i), int(s)) for p, i, s in zip(ops["program"][:, 0], lane_event, ops["seq"])], ops


@pytest.mark.parametrize("seed", range(6))
def test_rows_follow_each_program_in_turn(seed):
    rng = np.random.default_rng(seed)
    n_chunks = int(rng.integers(1, 6))
    chunk_pids, events, pid = [], [], 0
    for c in range(n_chunks):
        n = int(rng.integers(0 if seed == 5 else 1, 9))
        chunk_pids.append(np.stack([np.arange(pid, pid + n), np.zeros(n, int), np.zeros(n, int)], 1).astype(np.int32))
        pid += n
        for _ in range(int(rng.integers(1, 7))):
            sat_out = seed % 2 == 1 and n and rng.random() < 0.4       # a masked loop's trip some programs sit out
            events.append(_event(c, rows=(rng.random(n) < 0.5) if sat_out else None))
    got, ops = _table(events, chunk_pids)
    assert got == _by_hand(events, chunk_pids)
    # every row's lanes: the event's block, row by row of the programs that ran it
    for e_i, e in enumerate(events):
        mine = ops["lane_start"][ops["lane_start"] // 1000 == e_i] - 1000 * e_i
        assert sorted(mine.tolist()) == [4 * r for r in range(len(mine))]


def test_the_direct_layout_is_the_sorted_one():
    rng = np.random.default_rng(7)
    chunk = np.sort(rng.integers(0, 5, 40))
    sizes = rng.integers(1, 6, 5)
    idx, prog, seq = oprows._blocks(chunk, sizes)
    want = oprows._sorted([None] * 40, chunk, sizes, np.zeros(40, bool))
    np.testing.assert_array_equal(idx, want[0])
    np.testing.assert_array_equal(prog, want[1])
    np.testing.assert_array_equal(seq, want[3])
