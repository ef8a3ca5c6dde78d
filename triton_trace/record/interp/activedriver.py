"""The one touch of Triton's runtime driver: which driver ``triton.runtime.driver.active`` answers with.

Triton picks its driver lazily, among the backends whose ``is_active()`` is true; on a machine without a
GPU there is none ("0 active drivers"). ``set_active`` is public, but ``reset_active`` and ``default``
would build Triton's own CUDA driver the first time they are read, and under the CUDA redirect
(triton_trace.suite) torch says CUDA is available, so that driver would try to load libcuda. So both of
the private slots behind them (``DriverConfig._active``, ``_default``: listed in seams.py) are set for the
block and put back exactly as they were, unset ones included.
"""
from __future__ import annotations

from contextlib import contextmanager

from triton.runtime.driver import driver as _config

SLOTS = ("_active", "_default")
_UNSET = object()


@contextmanager
def driver_active(driver):
    """Make ``driver`` Triton's active (and default) driver inside the block."""
    saved = {name: _config.__dict__.get(name, _UNSET) for name in SLOTS}
    try:
        for name in SLOTS:
            setattr(_config, name, driver)
        yield driver
    finally:
        for name, value in saved.items():
            if value is _UNSET:
                _config.__dict__.pop(name, None)
            else:
                setattr(_config, name, value)


def inductor_without_driver(e: BaseException) -> bool:
    """Whether ``e`` is Inductor failing for want of a Triton driver (``cpu_backend="triton"``, no GPU)."""
    import sys
    config = sys.modules.get("torch._inductor.config")
    # "0 active drivers" in a fresh process; "0 compatible backends for target (cpu)" once Triton's driver
    # was pointed at the CPU (after inductor_on_cpu() in the same process)
    return getattr(config, "cpu_backend", None) == "triton" and any(
        m in str(e) for m in ("active drivers", "compatible backends"))
