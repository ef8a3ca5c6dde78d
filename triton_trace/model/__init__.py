"""The data model below every stage: a Trace of Launches (trace.py), what rebuilds a launch's kernel module
(kernelmodule.py), their compact lanes (lanes/), the interval-overlap helper the recorder and the race
check share (overlap.py), and the hooks through which a Trace is saved and shown (actions.py). Imports no
stage of the pipeline."""
from .kernelmodule import Helper, KeptInputs, KernelModule, Param, Unresolved  # noqa: F401
from .touches import Touch  # noqa: F401
from .trace import (ATOMIC_KINDS, KIND_CODE, KINDS, MAX_RANK, MEMORY_KINDS, OP_COLUMNS, READ_KINDS,  # noqa: F401
                    WRITE_KINDS, Access, Launch, TensorInfo, Trace, concat_ops, empty_ops, lanes_from_ops)

__all__ = ["Helper", "KeptInputs", "KernelModule", "Param", "Unresolved", "Touch", "ATOMIC_KINDS", "KIND_CODE",
           "KINDS", "MAX_RANK", "MEMORY_KINDS", "OP_COLUMNS", "READ_KINDS", "WRITE_KINDS", "Access", "Launch",
           "TensorInfo", "Trace", "concat_ops", "empty_ops", "lanes_from_ops"]
