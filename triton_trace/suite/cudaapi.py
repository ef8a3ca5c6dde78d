"""``torch.cuda`` answering as one GPU of the analysis's table, while the CUDA redirect is on.

Each function is installed over the module attribute of the same name and put back afterwards; what a
CPU can answer truthfully it answers (device properties from analysis/gpus.py, the bytes held by live
CUDA tensors, the random state), what has no meaning here is a no-op where a GPU's would only wait
(``synchronize``, streams, ``empty_cache``), and what only a GPU can do raises ``RequiresGPU`` naming it,
which ``pytest --tt-cuda`` reports as a skip. The memory functions are cudamemory.py's; building a CUDA
extension is refused by extensions.py; ``torch.version.cuda`` names a CUDA release.

Random numbers for CUDA tensors are drawn from the CPU's default generator (a GPU draws them with Philox,
whose values no CPU run would match anyway), so ``torch.cuda.manual_seed`` and the CUDA RNG state are that
generator's: seeding either device makes the CUDA draws repeat, as tests expect.
"""
from __future__ import annotations

import functools
import time
import types
from dataclasses import dataclass

import torch

from ..analysis.gpus import GPU
from ..errors import RequiresGPU
from ..record.patching import Scope
from . import extensions
from .cudamemory import memory_functions, requires_gpu as _requires_gpu
from .tensors import DEVICE_COUNT, check_index


@dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.cuda.get_device_properties`` returns, with the same attribute names."""
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int
    shared_memory_per_block_optin: int
    shared_memory_per_multiprocessor: int
    clock_rate: int                 # kHz
    memory_clock_rate: int          # kHz
    memory_bus_width: int           # bits
    shared_memory_per_block: int = 49152
    max_threads_per_block: int = 1024
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    warp_size: int = 32
    is_integrated: int = 0
    is_multi_gpu_board: int = 0
    uuid: str = "00000000-0000-0000-0000-000000000000"
    pci_bus_id: int = 0
    pci_device_id: int = 0
    pci_domain_id: int = 0

    @property
    def gcnArchName(self) -> str:           # torch's name for it on every backend
        return self.name

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory >> 20}MB, multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size >> 20}MB) [triton_trace: CUDA on the CPU]")


def device_properties(gpu: GPU) -> DeviceProperties:
    return DeviceProperties(gpu.device_name, gpu.arch // 10, gpu.arch % 10, gpu.total_memory, gpu.sms, gpu.l2_bytes,
                            gpu.shared_mem_optin, gpu.shared_mem_per_sm, gpu.sm_clock_khz, gpu.mem_clock_khz,
                            gpu.mem_bus_bits)


# --------------------------------------------------------------------------------------------------------
# streams and events: work is done when the call returns, so every wait is over at once
# --------------------------------------------------------------------------------------------------------
class Stream(torch.Stream):
    """A CUDA stream; ordering is trivial when every op completes before the call returns. A
    ``torch.Stream`` (over the CPU's), so torch's argument parsing takes it (``Tensor.record_stream``)."""
    _next = [1]

    def __new__(cls, device=None, priority: int = 0, stream_ptr: int = None, **kwargs):
        return super().__new__(cls, device="cpu")

    def __init__(self, device=None, priority: int = 0, stream_ptr: int = None, **kwargs):
        if device is not None:
            check_index(device)
        if stream_ptr is None:
            stream_ptr, Stream._next[0] = Stream._next[0], Stream._next[0] + 1
        self.cuda_stream = stream_ptr
        self._priority = priority

    device = property(lambda self: torch.device("cuda", 0))
    device_index = property(lambda self: 0)
    device_type = property(lambda self: 1)             # c10::DeviceType::CUDA
    stream_id = property(lambda self: self.cuda_stream)
    priority = property(lambda self: self._priority)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_event(self, event) -> None:
        return None

    def wait_stream(self, stream) -> None:
        return None

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self):
        return hash(("cuda", self.cuda_stream))

    def __repr__(self):
        return f"<torch.cuda.Stream device=cuda:0 cuda_stream={self.cuda_stream:#x}>"


class ExternalStream(Stream):
    def __init__(self, stream_ptr: int, device=None):
        super().__init__(device, stream_ptr=stream_ptr)


class Event:
    """A CUDA event. ``elapsed_time`` is the wall time between two records on this CPU (milliseconds,
    measured, not a GPU's time: use ``triton.testing.do_bench`` for a predicted kernel time)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._at = None

    def record(self, stream=None) -> None:
        self._at = time.perf_counter()

    def wait(self, stream=None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: "Event") -> float:
        if self._at is None or end._at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end._at - self._at) * 1e3

    def ipc_handle(self):
        raise RequiresGPU("torch.cuda.Event.ipc_handle")


class PhiloxGenerator:
    """``torch.cuda.default_generators[0]``: CUDA's generator state is Philox's (seed, offset), 16 bytes, which
    libraries read and write themselves (FlagGems' dropout and attention take the seed and advance the offset
    through ``get_state``/``set_state``). Seeding it seeds the CPU generator too, from which the random
    numbers of CUDA tensors are drawn, so seeded draws repeat."""
    device = torch.device("cuda", 0)

    def __init__(self, cpu: torch.Generator):
        self.cpu = cpu
        self._seed, self._offset = cpu.initial_seed(), 0

    def manual_seed(self, seed):
        self._seed, self._offset = int(seed), 0
        self.cpu.manual_seed(int(seed))
        return self

    def seed(self) -> int:
        self._seed, self._offset = self.cpu.seed(), 0
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> torch.Tensor:
        seed = self._seed - (1 << 64) if self._seed >= 1 << 63 else self._seed     # CUDA's is a uint64
        return torch.tensor([seed, self._offset], dtype=torch.int64).view(torch.uint8)

    def set_state(self, state: torch.Tensor) -> "PhiloxGenerator":
        self._seed, self._offset = (int(v) for v in state.view(torch.int64)[:2].tolist())
        return self

    def get_offset(self) -> int:
        return self._offset

    def set_offset(self, offset: int) -> None:
        self._offset = int(offset)


class _StreamContext:
    def __init__(self, api, stream):
        self.api, self.stream, self.prev = api, stream, None

    def __enter__(self):
        self.prev = self.api.stream
        if self.stream is not None:
            self.api.stream = self.stream
        return self.stream

    def __exit__(self, *exc):
        self.api.stream = self.prev
        return False


class _DeviceContext:
    """``torch.cuda.device(i)``: only cuda:0 exists, so entering it changes nothing."""

    def __init__(self, device):
        if device is not None and not (isinstance(device, torch.device) and device.type == "cpu"):
            check_index(device)
        self.idx = 0 if device is not None else -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _NoGraph:
    def __init__(self, *args, **kwargs):
        raise RequiresGPU("CUDA graphs (torch.cuda.CUDAGraph)")


# --------------------------------------------------------------------------------------------------------
# the namespace
# --------------------------------------------------------------------------------------------------------
class CudaAPI:
    """The functions installed over ``torch.cuda``'s, for one GPU of the table."""

    def __init__(self, gpu: GPU):
        self.gpu = gpu
        self.properties = device_properties(gpu)
        self.default_stream = Stream(stream_ptr=0)
        self.stream = self.default_stream

    def functions(self) -> dict:
        gen = torch.default_generator
        props = self.properties

        def properties(device=None):
            _one(device)
            return props

        def seed_with(seed) -> None:
            gen.manual_seed(int(seed))

        def reseed() -> None:
            gen.seed()

        # each name its own function object: torch._dynamo, imported lazily (also while the redirect is on),
        # maps torch.cuda's functions by identity and refuses one object under two names of different rules
        return {
            "is_available": lambda: True, "device_count": lambda: DEVICE_COUNT, "is_initialized": lambda: True,
            "init": lambda: None, "current_device": lambda: 0, "set_device": lambda device: _one(device),
            "device": _DeviceContext, "device_of": lambda t: _DeviceContext(0),
            "get_device_name": lambda device=None: properties(device).name,
            "get_device_capability": lambda device=None: (properties(device).major, properties(device).minor),
            "get_device_properties": properties,
            "get_arch_list": lambda: [f"sm_{self.gpu.arch}"],
            "is_bf16_supported": lambda including_emulation=True: self.gpu.arch >= 80,
            "synchronize": lambda device=None: _one(device), "ipc_collect": lambda: None, "empty_cache": lambda: None,
            "Stream": Stream, "ExternalStream": ExternalStream, "Event": Event,
            "stream": lambda stream: _StreamContext(self, stream),
            "current_stream": lambda device=None: self.stream,
            "default_stream": lambda device=None: self.default_stream,
            "set_stream": lambda stream: setattr(self, "stream", stream),
            "manual_seed": seed_with, "manual_seed_all": lambda seed: seed_with(seed), "seed": reseed,
            "seed_all": lambda: reseed(),
            "initial_seed": gen.initial_seed,
            "get_rng_state": lambda device="cuda": gen.get_state(),
            "set_rng_state": lambda new_state, device="cuda": gen.set_state(new_state),
            "get_rng_state_all": lambda: [gen.get_state()],
            "set_rng_state_all": lambda states: gen.set_state(states[0]),
            "default_generators": (PhiloxGenerator(gen),),
            **memory_functions(props),
            "utilization": _requires_gpu("torch.cuda.utilization"),
            "temperature": _requires_gpu("torch.cuda.temperature"),
            "power_draw": _requires_gpu("torch.cuda.power_draw"),
            "clock_rate": _requires_gpu("torch.cuda.clock_rate"),
            "cudart": _requires_gpu("torch.cuda.cudart"),
            "current_blas_handle": _requires_gpu("torch.cuda.current_blas_handle"),
            "CUDAGraph": _NoGraph, "graph": _requires_gpu("CUDA graphs (torch.cuda.graph)"),
            "make_graphed_callables": _requires_gpu("CUDA graphs (torch.cuda.make_graphed_callables)"),
            "graph_pool_handle": _requires_gpu("CUDA graphs (torch.cuda.graph_pool_handle)"),
            "is_current_stream_capturing": lambda: False,
        }


def _one(device=None) -> None:
    if device is not None:
        check_index(device)


class _NvtxRange:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


NVTX = {"range_push": lambda msg: 0, "range_pop": lambda: 0, "range_start": lambda msg: 0,
        "range_end": lambda range_id: None, "mark": lambda msg: None, "range": _NvtxRange}


# libraries test ``torch.version.cuda is not None`` before taking their CUDA paths; a CPU build says None.
# (A release whose toolkit supports every GPU of the table, B200 included.)
CUDA_VERSION = "12.8"


def install(scope: Scope, api: CudaAPI) -> None:
    """Install ``api`` over ``torch.cuda`` and ``torch.cuda.memory`` (and NVTX's markers, autocast on "cuda",
    ``torch.version.cuda`` and CUDA extension builds) into ``scope``."""
    seen: set = set()
    for name, value in api.functions().items():
        if isinstance(value, types.FunctionType):
            # one object under two names (set_device and synchronize) makes torch._dynamo's table of torch
            # functions refuse to load (it maps names to objects, with a rule per name)
            value = _alias(value, name) if id(value) in seen else value
            seen.add(id(value))
        if not name.startswith("_"):
            scope.set_attr(torch.cuda, name, value)
        if hasattr(torch.cuda.memory, name):      # the same functions, called through their own module
            scope.set_attr(torch.cuda.memory, name, value)
    for name, value in NVTX.items():
        scope.set_attr(torch.cuda.nvtx, name, value)
    if torch.version.cuda is None:
        scope.set_attr(torch.version, "cuda", CUDA_VERSION)
    _autocast(scope)
    extensions.install(scope)


def _alias(fn, name: str):
    @functools.wraps(fn)
    def alias(*args, **kwargs):
        return fn(*args, **kwargs)
    alias.__name__ = alias.__qualname__ = name
    return alias


def _autocast(scope: Scope) -> None:
    """``torch.autocast("cuda")`` (and ``torch.cuda.amp.autocast``) also turns on the CPU's autocast with
    the same dtype, so CUDA tensors (CPU memory) are cast as a GPU would cast them, where torch's CPU
    autocast casts the op too (matmul, linear, conv, bmm, baddbmm: its lower-precision list)."""
    cls = torch.amp.autocast_mode.autocast
    enter, exit_ = cls.__enter__, cls.__exit__

    def __enter__(self):
        out = enter(self)
        if getattr(self, "device", None) == "cuda" and hasattr(self, "_enabled"):
            self._tt_cpu = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
            torch.set_autocast_enabled("cpu", self._enabled)
            torch.set_autocast_dtype("cpu", self.fast_dtype)
        return out

    def __exit__(self, *exc):
        saved = self.__dict__.pop("_tt_cpu", None)
        if saved is not None:
            torch.set_autocast_enabled("cpu", saved[0])
            torch.set_autocast_dtype("cpu", saved[1])
        return exit_(self, *exc)
    scope.set_attr(cls, "__enter__", __enter__)
    scope.set_attr(cls, "__exit__", __exit__)
