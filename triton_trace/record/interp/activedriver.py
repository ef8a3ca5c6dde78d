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
