"""What one launch recorded, as it grows: an event per op of each chunk, the lanes of its memory ops, its
values back to back in one buffer, the string tables (source files, value dtypes) they point into, and the
elementwise flops of the running chunk, flushed into events when it ends.

The collector decides what to record (the chunk's programs, the budget); this store only keeps it, undoes
it to a mark, and builds the launch's columns from it at the end.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from ..model.trace import KIND_CODE
from ..model.lanes import LaneWriter
from .oprows import Event, op_rows
from .valueblob import ValueBlob

EVENT_BYTES = 120          # what one event costs, counted against the memory limit


class EventsMark(NamedTuple):
    events: int
    chunks: int
    lanes: tuple
    values: int
    files: frozenset
    dtypes: frozenset


class EventStore:
    def __init__(self, values_cap: int):
        self.events: list = []
        self.chunk_pids: list = []       # per chunk: (R, 3) int32, the kept programs in execution order
        self.lanes = LaneWriter()
        self.blob = ValueBlob(values_cap)
        self.files: dict = {}            # source file -> its index (the events' file column)
        self.dtypes: dict = {}           # numpy dtype string -> its index (the events' value_dtype)
        self.flops: dict = {}            # (file, line) -> flops of the running chunk: one count, or per program
        self.seq = 0                     # the next event's position within its chunk

    @property
    def nbytes(self) -> int:
        """Bytes the recording holds now: lanes, values and event rows."""
        return self.lanes.nbytes + self.blob.used + EVENT_BYTES * len(self.events)

    def file_id(self, file: Optional[str]) -> int:
        if file is None:
            return -1
        fid = self.files.get(file)
        if fid is None:
            fid = self.files[file] = len(self.files)
        return fid

    def add(self, kind, fid, line, tensor, elem_bytes, shape, lane_start, lane_count, aux, rows=None) -> int:
        """One more event of the running chunk; its index. ``rows``: which of the chunk's kept programs ran
        it (None: all). The event keeps the block's own shape (values are broadcast to it); a rank above the
        ops table's MAX_RANK is flattened only when the table is built."""
        ev = Event(len(self.chunk_pids), self.seq, KIND_CODE[kind], fid, line, tensor, elem_bytes,
                   tuple(shape), lane_start, lane_count, aux)
        ev.rows = rows
        self.events.append(ev)
        self.seq += 1
        return len(self.events) - 1

    def add_values(self, row: int, values: np.ndarray) -> None:
        """The values of event ``row``, already in its shape (programs kept first when batched)."""
        ev = self.events[row]
        dt = values.dtype.str
        did = self.dtypes.get(dt)
        if did is None:
            did = self.dtypes[dt] = len(self.dtypes)
        ev.value_start, ev.value_dtype, ev.value_size = self.blob.append(values), did, values.dtype.itemsize

    def add_flops(self, key: tuple, flops: int, active: Optional[np.ndarray], size: int) -> None:
        """Elementwise flops at ``key`` by every program of the chunk, or only by ``active`` (bool over the
        chunk's ``size`` programs: a masked loop's trip), then counted per program."""
        if active is None:
            self.flops[key] = self.flops.get(key, 0) + int(flops)
            return
        per = self.flops.get(key, 0)
        if np.ndim(per) == 0:
            per = np.full(size, per, dtype=np.int64)
        per[active] += int(flops)
        self.flops[key] = per

    def begin_chunk(self) -> None:
        self.seq = 0
        self.flops.clear()

    def end_chunk(self, kept: np.ndarray, keep: Optional[np.ndarray]) -> None:
        """Close the chunk whose kept programs are ``kept`` (``keep``: which of its programs they are): its
        flops become "math" events, one per line (and per count, where programs ran different trips)."""
        for (f, line), flops in sorted(self.flops.items()):
            if np.ndim(flops) == 0:
                self.add("math", f, line, -1, 0, (), 0, 0, (int(flops), 0, 0))
                continue
            per = flops if keep is None else flops[keep]
            for v in np.unique(per[per > 0]).tolist():
                self.add("math", f, line, -1, 0, (), 0, 0, (int(v), 0, 0), rows=per == v)
        self.flops.clear()
        self.chunk_pids.append(kept)

    def mark(self) -> EventsMark:
        return EventsMark(len(self.events), len(self.chunk_pids), self.lanes.mark(), self.blob.used,
                          frozenset(self.files), frozenset(self.dtypes))

    def rollback(self, mark: EventsMark) -> None:
        del self.events[mark.events:], self.chunk_pids[mark.chunks:]
        self.blob.used = mark.values
        self.lanes.rollback(mark.lanes)
        # (indexes are handed out in order: the entries added since the mark are the last ones)
        self.files = {k: v for k, v in self.files.items() if k in mark.files}
        self.dtypes = {k: v for k, v in self.dtypes.items() if k in mark.dtypes}
        self.flops.clear()

    def restart(self) -> None:
        """Empty the store in place, its cap kept (a worker process's own part starts: record/parallel/).
        The lists stay the same objects: hooks that keep a reference to them see what is recorded next."""
        self.events.clear()
        self.chunk_pids.clear()
        self.lanes.__init__()
        self.blob.used = self.blob.touched = 0
        self.files.clear()
        self.dtypes.clear()
        self.flops.clear()
        self.seq = 0

    def handoff(self) -> dict:
        """What this store holds, to hand to the store of the process that goes on (record/parallel/)."""
        return {"events": self.events, "chunk_pids": self.chunk_pids, "lanes": self.lanes,
                "values": self.blob.buf[:self.blob.used], "files": list(self.files), "dtypes": list(self.dtypes)}

    def absorb(self, part: dict, take: Callable[[int], bool], refused: Optional[tuple] = None) -> None:
        """Append what another store recorded (``handoff``) for programs that run after this store's, as if
        recorded here: its chunks, lanes and values follow this store's, its file and dtype indexes are this
        store's (new ones numbered on in the order it met them), and an event keeps its values while ``take``
        (elements) allows, as ``Budget.take_values`` did when they were recorded: once it refuses, no later
        event keeps values. Values were recorded in event order, so the kept ones are a prefix of its buffer.
        ``refused``: (event, elements) of the values the other store's budget refused first (that event holds
        none): asked of ``take`` here too, which refuses them as well, so the cap is reached where one store
        would have reached it."""
        chunk0, lane0, value0 = len(self.chunk_pids), self.lanes.lanes, self.blob.used
        files = [self.file_id(f) for f in part["files"]]
        pids, dtypes = part["chunk_pids"], part["dtypes"]
        kept_end, keeping = 0, True
        for i, ev in enumerate(part["events"]):
            if refused is not None and i == refused[0] and keeping:
                keeping = take(refused[1])
            if ev.value_start >= 0:
                rows = len(pids[ev.chunk]) if ev.rows is None else int(ev.rows.sum())
                keeping = keeping and take(rows * ev.lanes)
                if keeping:
                    kept_end = ev.value_start + rows * ev.lanes * ev.value_size
                    dt = dtypes[ev.value_dtype]
                    did = self.dtypes.get(dt)
                    if did is None:
                        did = self.dtypes[dt] = len(self.dtypes)
                    ev.value_start, ev.value_dtype = ev.value_start + value0, did
                else:
                    ev.value_start, ev.value_dtype, ev.value_size = -1, -1, 0
            ev.chunk += chunk0
            if ev.elem_bytes:                 # a memory op's lanes (other events have none, at 0)
                ev.lane_start += lane0
            if ev.file >= 0:
                ev.file = files[ev.file]
            self.events.append(ev)
        self.chunk_pids.extend(pids)
        self.lanes.extend(part["lanes"])
        if kept_end:
            self.blob.append(np.asarray(part["values"][:kept_end]))

    def columns(self) -> dict:
        """The launch's recorded columns: ``Launch`` fields by name."""
        recorded = np.concatenate(self.chunk_pids) if self.chunk_pids else np.zeros((0, 3), np.int32)
        return {"files": tuple(self.files), "value_dtypes": tuple(self.dtypes),
                "ops": op_rows(self.events, self.chunk_pids), "lanes": self.lanes.finish(),
                "values": self.blob.array(), "recorded_ids": recorded.astype(np.int32).reshape(-1, 3)}
