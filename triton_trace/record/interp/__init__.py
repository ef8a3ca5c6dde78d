"""The seam: the hooks that make Triton's interpreter record, and the table of every private Triton name.

``hooks`` installs and restores the recording seams and runs a grid (``compute`` records the compute ops),
``access`` hands the rest of the recorder the interpreter's objects (the only other door to it: its value
class, builder, memory module, reduction classes, combine functions), ``kernels`` says what a kernel object
is, ``rewrites`` holds the rewritten copies of kernels the interpreter runs, ``proxy`` stands in for the
interpreter's C++ memory module, ``semantics`` makes traced kernels compute
as compiled code does where the plain interpreter differs, ``activedriver`` is the one touch of the
runtime's driver slot, and ``seams`` lists the supported releases and every private name the package
touches anywhere (tests/project/test_architecture.py keeps that list complete, so a Triton upgrade is one
file to read; tests/project/test_seam_access.py keeps the interpreter's names inside this folder).
"""
