"""Unwritten outputs judged across the launches of a trace that write one storage.

A host loop that launches a kernel once per chunk of an output (``out[i:i+n]`` by launch, or the whole
``out`` with a chunk offset) leaves, launch by launch, everything but its own chunk unwritten: judged alone,
each launch would report the rest of the output. An element is unwritten only when no launch of the trace
wrote it. Launches share a storage when their arguments carry the same ``TensorInfo.buffer`` (the recorder
numbers each live storage once: record/memory/buffers.py); offsets are compared in bytes, since two
launches may view one storage with different element types.

``Across`` is fed every launch's context as analyze() goes (``note``), then rewrites the per-launch
``unwritten_output`` findings (``merge``): the elements another launch wrote leave the finding, a finding
left empty is dropped, and the launches that leave the same elements unwritten give one finding, at the
first of them, naming them all. A launch on a shared storage that did not complete or ran programs
unrecorded may have written the rest: its storage is not judged (as check_coverage does for one launch).
"""
from __future__ import annotations

import numpy as np

from ..findings import Finding
from . import intervals
from .extent import intersect, runs
from .sanitizer import missing_elements, unwritten_finding, written_elements


def shared_buffers(launches) -> set:
    """The storages a declared output of some launch lives on that another launch also used."""
    users, outputs = {}, set()
    for i, lc in enumerate(launches):
        for t in lc.tensors:
            if t.buffer >= 0:
                users.setdefault(t.buffer, set()).add(i)
                if t.name in lc.outputs:
                    outputs.add(t.buffer)
    return {b for b in outputs if len(users[b]) > 1}


def _subtract(s: np.ndarray, e: np.ndarray, cut_s: np.ndarray, cut_e: np.ndarray) -> tuple:
    """[s, e) minus [cut_s, cut_e) (each sorted and disjoint)."""
    if not len(s) or not len(cut_s):
        return s, e
    lo, hi = int(min(s[0], cut_s[0])), int(max(e[-1], cut_e[-1]))
    gap_s, gap_e = np.r_[lo, cut_e], np.r_[cut_s, hi]            # the complement of the cut within [lo, hi)
    keep = gap_e > gap_s
    return intersect(s, e, gap_s[keep], gap_e[keep])


class Across:
    def __init__(self, launches):
        self.launches = launches
        self.shared = shared_buffers(launches)
        self.written: dict = {}        # buffer -> [(launch, byte starts, byte ends)]
        self.sizes: dict = {}          # buffer -> its bytes, as the first launch saw it
        self.unknown: set = set()      # buffers some launch may have written unrecorded
        self.missing: dict = {}        # (launch, tensor) -> element intervals its own programs left unwritten

    def note(self, ctx) -> None:
        """Keep what launch ``ctx`` wrote to the shared storages, and what its outputs there lack."""
        if not self.shared:
            return
        lc = ctx.launch
        mine = [ti for ti, t in enumerate(lc.tensors) if t.buffer in self.shared]
        if not mine:
            return
        if lc.skipped_programs or not lc.completed:
            self.unknown.update(lc.tensors[ti].buffer for ti in mine)
            return
        for ti in mine:
            t = lc.tensors[ti]
            eb = t.elem_bytes
            # a trace file is untrusted: two "launches of one storage" of different sizes are not compared
            if self.sizes.setdefault(t.buffer, t.storage_size * eb) != t.storage_size * eb:
                self.unknown.add(t.buffer)
                continue
            s, e = written_elements(ctx, ti)
            self.written.setdefault(t.buffer, []).append((ctx.index, s * eb, e * eb))
            if t.name in lc.outputs and (ctx.index, ti) not in self.missing:
                self.missing[(ctx.index, ti)] = missing_elements(ctx, ti)

    def _tensor(self, f: Finding):
        lc = self.launches[f.launch] if 0 <= f.launch < len(self.launches) else None
        if lc is None:
            return None
        for ti, t in enumerate(lc.tensors):
            if t.name == f.tensor and (f.launch, ti) in self.missing:
                return ti
        return None

    def merge(self, found: list, max_examples: int) -> list:
        """``found`` with its unwritten_output findings on shared storages judged over every launch."""
        if not self.missing:
            return found
        out, seen = [], {}
        for f in found:
            ti = self._tensor(f) if isinstance(f, Finding) and f.kind == "unwritten_output" else None
            if ti is None:
                out.append(f)
                continue
            t = self.launches[f.launch].tensors[ti]
            if t.buffer in self.unknown:
                continue
            eb = t.elem_bytes
            s, e = self.missing[(f.launch, ti)]
            others = [(a, b) for j, a, b in self.written.get(t.buffer, ()) if j != f.launch]
            if others:
                cut = intervals.union(np.concatenate([a for a, _ in others]), np.concatenate([b for _, b in others]))
                bs, be = _subtract(s * eb, e * eb, *cut)
                # an element stays unwritten while any of its bytes is
                s, e = intervals.union(bs // eb, -(-be // eb))
            if not int((e - s).sum()):
                continue
            key = (t.buffer, s.tobytes(), e.tobytes())
            if key in seen:
                seen[key][1].append(f.launch)
                continue
            seen[key] = [len(out), [f.launch], ti, s, e]
            out.append(f)
        for i, users, ti, s, e in seen.values():
            if len(users) == 1 and not self._shared_with_writer(out[i], ti):
                continue                   # no other launch wrote this storage: the launch's own finding stands
            b = self.launches[users[0]].tensors[ti].buffer
            every = sorted({j for j, _, _ in self.written.get(b, ())})
            lo, hi = runs(np.asarray(every, np.int64))
            names = ", ".join(str(a) if a == z else f"{a}-{z}" for a, z in zip(lo.tolist(), hi.tolist()))
            out[i] = unwritten_finding(self.launches[users[0]], users[0], ti, s, e, max_examples,
                                       by=f"any of the {len(every)} launches that use its storage (launches {names})")
        return out

    def _shared_with_writer(self, f: Finding, ti: int) -> bool:
        b = self.launches[f.launch].tensors[ti].buffer
        return any(j != f.launch and len(a) for j, a, _ in self.written.get(b, ()))
