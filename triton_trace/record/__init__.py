"""Recording: what runs a kernel and what it writes down.

Here: ``session`` (the ``@trace`` decorator and the session collecting launches), ``autotune`` (an autotuned
kernel's configs, traced or timed), ``options``, ``executor`` (a launch's grid in chunks), ``collector`` (one
launch's recording, built from ``events`` (the columnar event and value store), ``budget`` (the value cap,
the memory limit and what was left out) and ``chunkstate`` (the programs of the chunk running now)),
``oprows``, ``frames`` (an op to the user's source line), ``kernelmodule`` (what a kernel needs besides its
source, captured into model.KernelModule), ``patching`` (undo logs), ``valueblob``. By role underneath:
``interp/`` (the seam to Triton's interpreter: its private names in ``interp/access`` and ``interp/seams``'
table), ``batch/`` (a chunk of programs in one numpy pass), ``divergence/`` (loops, branches and exits that
differ between programs), ``gpu/`` (GPU semantics: low precision, libdevice, Python logic on blocks, debug
ops), ``memory/`` (the address space, attribution, provenance, poison), ``checks/`` (runtime checks: one
monitor module each, listed by name in ``checks/table.py``, with their records' shapes in
``checks/schema.py``).
"""
