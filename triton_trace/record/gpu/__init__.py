"""GPU semantics the plain interpreter does not give: lowp (bfloat16/float16 as compiled code computes them),
libdevice (libdevice math), pylogic (Python ``and``/``or``/``not`` on blocks), debugops (``tl.device_assert``
and prints), compiledops (min/max NaN rules, NaN padding, histogram range, wrapping integer sums, dot_scaled
where the interpreter lacks it)."""
