"""The seam: the hooks that make Triton's interpreter record, and the table of every private Triton name.

``hooks`` installs and restores the recording seams and runs a grid, ``proxy`` stands in for the
interpreter's C++ memory module, ``semantics`` makes traced kernels compute as compiled code does where the
plain interpreter differs, ``activedriver`` is the one touch of the runtime's driver slot, and ``seams`` lists
the supported releases and every private name the package touches anywhere (tests/test_architecture.py keeps
that list complete, so a Triton upgrade is one file to read).
"""
