"""A launch's kernel module as the JSON object a trace file keeps, and a launch with a crafted one: the
security tests rewrite the module as an attacker would rewrite the file, then rebuild the typed module from
it (model.KernelModule.from_dict checks the shape, not the content)."""
from __future__ import annotations

import dataclasses

from triton_trace.model import KernelModule


def module_dict(launch) -> dict:
    """``launch.module`` in the shape a trace file's ``meta.module`` holds."""
    return launch.module.to_dict()


def with_module(launch, record: dict, **changes):
    """``launch`` with its kernel module read from ``record`` (and any other fields in ``changes``)."""
    return dataclasses.replace(launch, module=KernelModule.from_dict(record), **changes)
