"""Native helpers: C built at run time with the machine's compiler, each with a numpy fallback.

- ``cbuild.py``: builds a C source once per machine and source, kept in the private cache directory.
- ``arena.py`` + ``arena.c``: numpy's allocations during a launch served from pages it already touched.
- ``cacheloops.py`` + ``loops.c``: the cache simulation's loops, called through ctypes.
- ``rowstats.py`` + ``rowstats.c``: the per-program math values' NaN/Inf counts and finite range, one pass.
"""
