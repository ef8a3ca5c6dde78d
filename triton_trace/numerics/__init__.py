"""GPU arithmetic emulated on numpy, with no Triton in it: rounding in every mode and to the narrow float
types (rounding.py), and libdevice's functions by their CUDA names (libdevice_ops.py for the math,
libdevice_exact.py for the bit-exact rounding-mode, conversion and integer functions), the compiled
kernel's arithmetic (compiled.py), the MX block-scaled formats (mx.py), and a PTX interpreter for inline
assembly (ptx.py parses and runs a block; ptx_int.py and ptx_float.py are its instructions, ptx_formats.py the
float formats' bits: rounding once, the GPU's NaNs, fp8/fp4 codes, float-to-integer conversion), and the
special-function unit's approximations from tables measured on a GPU (mufu.py). The interpreter seam
(record/interp) maps Triton's calls onto these."""
