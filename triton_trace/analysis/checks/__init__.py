"""The checks: findings from the recorded accesses and the recorder's notes.

- ``sanitizer.py``: per-lane checks: bounds, views, uninitialised reads, output coverage, double writes.
- ``across.py``: output coverage over every launch of a trace that writes one storage.
- ``writeorder.py``: the order of reads and writes of declared outputs.
- ``races.py``: races between programs, with locks taken into account.
- ``recorded.py``: what the recorder noted as the kernel ran (device asserts, NaN/Inf births, overflow).
- ``valuechecks.py``: the newer value checks (integer division, disagreeing lanes, padded reductions).
- ``extent.py``: a finding's full extent (every program, every element), counted exactly.
- ``intervals.py``, ``pieces.py``: the elements rows touch, as intervals and as whole pieces.

Imports nothing from ``analysis/memory`` or ``analysis/advice`` (tests/project/test_architecture.py).
"""
