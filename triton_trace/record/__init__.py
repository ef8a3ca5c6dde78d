"""Recording: what runs a kernel and what it writes down.

Here: ``session`` (the ``@trace`` decorator and the session collecting launches), ``options``, ``executor``
(a launch's grid in chunks), ``collector`` (columnar events and values of one launch), ``oprows``,
``frames`` (an op to the user's source line), ``kernelmodule`` (what a kernel needs besides its source),
``patching`` (undo logs), ``valueblob``. By role underneath: ``interp/`` (the seam to Triton's interpreter),
``batch/`` (a chunk of programs in one numpy pass), ``divergence/`` (loops, branches and exits that differ
between programs), ``gpu/`` (GPU semantics: low precision, libdevice, Python logic on blocks, debug ops),
``memory/`` (the address space, attribution, provenance, poison), ``checks/`` (runtime value checks).
"""
