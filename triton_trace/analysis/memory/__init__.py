"""The memory model: what each memory op costs on the analysed GPU.

- ``coalescing.py``: the 32-byte sectors and 128-byte lines each op touches, grouped as a warp issues them.
- ``layouts.py``: the compiler's layouts (which thread of which warp touches which element, in which instruction).
- ``cache.py``: the L2 (and L1) simulation's entry point: which requests reach DRAM.
- ``lockstep.py``: the L2's sets stepped in lock step in numpy.
- ``streaming.py``: the closed form for streams that touch no line twice.
- ``jitsteps.py``, ``l1jit.py``: the same steps in the compiled loops (``native/loops.c``).

Imports nothing from ``analysis/checks`` or ``analysis/advice`` (tests/project/test_architecture.py).
"""
