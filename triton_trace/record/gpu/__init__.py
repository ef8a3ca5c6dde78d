"""GPU semantics the plain interpreter does not give: lowp (bfloat16/float16 as compiled code computes them),
libdevice (libdevice math), pylogic (Python ``and``/``or``/``not`` on blocks), debugops (``tl.device_assert``
and prints)."""
