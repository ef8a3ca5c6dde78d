"""Correct Triton kernels and their host-side launchers: the "clean" set of the test suite.

Every kernel is a plain Python function here and ``make_<name>()`` wraps it in a fresh ``@triton.jit``
(plus ``@triton.autotune`` / ``@triton.heuristics`` where that is the point), because
``triton_trace.trace`` replaces the ``run`` of the kernel object it decorates: each test traces its own copy.
Launchers take torch tensors (CPU, or CUDA for the GPU tests) and the kernel to launch
(``kernel=trace(make_add())``), and return outputs. No kernel touches a lane outside its tensors
(masked-off lanes are inactive) and none races (layer norm's partial dW/dB buffers are guarded by a lock).

Kernels live in real files because Triton's interpreter re-reads their source with ``inspect``.
Triton 3.9 removed block pointers (``tl.make_block_ptr`` raises NotImplementedError), so the block-pointer
kernel only runs on earlier releases.
"""
from .access_patterns import *  # noqa: F401,F403
from .launch_styles import *  # noqa: F401,F403
from .launch_styles import _poly  # noqa: F401
from .tutorials import *  # noqa: F401,F403
from .library import *  # noqa: F401,F403
