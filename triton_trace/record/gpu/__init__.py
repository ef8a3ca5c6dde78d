"""GPU semantics the plain interpreter does not give: lowp (bfloat16/float16 as compiled code computes them),
libdevice (libdevice math), pylogic (Python ``and``/``or``/``not`` on blocks), debugops (``tl.device_assert``
and prints), compiledops (min/max NaN rules, NaN padding, histogram range, wrapping integer sums, dot_scaled
where the interpreter lacks it), dotscaled (tl.dot_scaled as sm_90 decomposes it), ascompiled
(numerics="compiled"), inlineasm (tl.inline_asm_elementwise's PTX run on numpy, numerics/ptx.py)."""
