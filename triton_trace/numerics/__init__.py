"""GPU arithmetic emulated on numpy, with no Triton in it: rounding in every mode and to the narrow float
types (rounding.py), and libdevice's functions by their CUDA names (libdevice_ops.py for the math,
libdevice_exact.py for the bit-exact rounding-mode, conversion and integer functions). The interpreter
seam (record/interp) maps Triton's calls onto these."""
