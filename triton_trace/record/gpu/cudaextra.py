"""``triton.language.extra.cuda``'s builtins that read the GPU's state, in a traced launch.

They are ``@builtin``/``@extern`` functions that build IR from the compiler's ``_semantic`` (``num_threads``
reads the launch option ``num_warps``; ``smid`` and ``globaltimer`` emit inline PTX), which Triton's
interpreter never patches: a kernel calling them stopped with "Did you forget to add @triton.jit?". Here,
for the launch: ``num_warps()``/``num_threads()`` are the launch's constexprs; ``globaltimer()`` reads the
host's clock in nanoseconds through the inline-PTX path (``%globaltimer``, numerics/ptx.py); ``smid()`` is
the SM a GPU's block scheduler would give the program when every program of the grid is resident at once
(its linear id modulo the target's SM count), an int32 like the GPU's: the real value depends on the
scheduler, so a kernel that computes with it is as nondeterministic here as there only in its value.
A builtin passed as a constexpr argument (``kernel[grid](..., func=tl.extra.cuda.globaltimer)``) is swapped
for the launch's version (``constexpr_arg``).
"""
from __future__ import annotations

import triton.language as tl

SMS = 132          # an H100 SXM's SM count (the GPU the tracer answers as by default)


def _module():
    try:
        from triton.language.extra.cuda import utils
    except ImportError:             # a Triton without the CUDA extras
        return None
    return utils


def _replacements(num_warps: int) -> dict:
    def num_warps_(_semantic=None):
        return tl.constexpr(num_warps)

    def num_threads(_semantic=None):
        return tl.constexpr(num_warps * 32)

    def globaltimer(_semantic=None):
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    def smid(_semantic=None):
        pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
        return pid % SMS
    return {"num_warps": num_warps_, "num_threads": num_threads, "globaltimer": globaltimer, "smid": smid}


_ORIGINALS: dict = {}       # id of a builtin as Triton defines it -> its name


def install(scope, num_warps: int) -> dict:
    """Swap the builtins on ``triton.language.extra.cuda`` (and its ``utils`` module) for the launch; returns
    the original -> replacement map for constexpr arguments."""
    utils = _module()
    if utils is None:
        return {}
    import triton.language.extra.cuda as cuda
    swapped = {}
    for name, fn in _replacements(num_warps).items():
        original = getattr(utils, name, None)
        if original is None:
            continue
        swapped[id(original)] = fn
        for module in (utils, cuda):
            if getattr(module, name, None) is original:
                scope.set_attr(module, name, fn)
    return swapped


def constexpr_arg(value, swapped: dict):
    return swapped.get(id(value), value) if callable(value) else value
