"""Everything that touches Triton's interpreter internals, and nothing else does.

Triton's interpreter is private and changes between releases, so its seams are reached only from this
package: ``hooks`` installs and restores the recording seams and runs a grid, ``semantics`` makes traced
kernels compute as compiled code does where the plain interpreter differs, and ``batch`` runs many
programs in one numpy pass. ``toolchain`` is the one touch of Triton's compiler internals (the launcher's
specialization, compiling for a GPU target on the CPU). ``tests/test_fidelity.py`` checks that no module outside this package
imports Triton's interpreter module.
"""
