"""The CUDA device guard a CPU-only torch lacks, for ``torch.compile`` under the CUDA redirect (inductor.py).

c10's registry of device guards has no CUDA entry on a CPU-only build, and autograd metadata for a fake
CUDA tensor that requires grad (every nn.Module parameter) asks for one: c10 then aborts the process.
torch's own fallback (torch._C._ensureCUDADeviceGuardSet) fills the entry only on a CUDA build without a
GPU. This fills it with c10's FakeGuardImpl for the block, and empties it again after.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional

import torch

from ..errors import TritonTraceError
from ..native import cbuild
from ..record.patching import Scope

GUARD_SOURCE = """// triton_trace: c10's FakeGuardImpl as the CUDA device guard (suite/cudaguard.py); torch %s at %s
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>

namespace {
const c10::impl::FakeGuardImpl<c10::DeviceType::CUDA> fake_guard;
std::atomic<const c10::impl::DeviceGuardImplInterface*>& slot() {
  return c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)];
}
}  // namespace

extern "C" int tt_guard_install() {
  const c10::impl::DeviceGuardImplInterface* expected = nullptr;
  return slot().compare_exchange_strong(expected, &fake_guard) ? 1 : 0;
}

extern "C" void tt_guard_remove() {
  const c10::impl::DeviceGuardImplInterface* expected = &fake_guard;
  slot().compare_exchange_strong(expected, nullptr);
}
"""
_GUARD: list = []          # the loaded library, or the OSError that stopped its build


def _torch_dir() -> str:
    return os.path.dirname(torch.__file__)


def _build_guard(cxx: str, source_path: str, path: str) -> None:
    lib = os.path.join(_torch_dir(), "lib")
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        command = [cxx, "-O1", "-shared", "-fPIC", "-std=c++17", "-I", os.path.join(_torch_dir(), "include"),
                   "-o", tmp, source_path, "-L", lib, "-lc10", f"-Wl,-rpath,{lib}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise OSError(f"{cxx} could not compile the CUDA device guard: {done.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def guard_library():
    """The guard's build for this torch (cached like the package's C helpers, native/cbuild.py; its source names
    torch's version and folder, so each torch gets its own), or the OSError that stopped it."""
    if not _GUARD:
        with tempfile.TemporaryDirectory() as folder:
            src = os.path.join(folder, "cuda_guard.cpp")
            with open(src, "w") as f:
                f.write(GUARD_SOURCE % (torch.__version__, _torch_dir()))
            cxx = lambda: shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")  # noqa: E731
            try:
                _GUARD.append(cbuild.load(src, "cuda_guard", _build_guard, cxx))
            except OSError as e:
                _GUARD.append(e)
    return _GUARD[0]


def install_guard(scope: Scope) -> Optional[Exception]:
    """Fill the CUDA guard entry for the block; else the error that every trace then raises (without the
    guard, the first parameter would abort the process)."""
    if torch.cuda._is_compiled():
        return None       # torch's own fallback serves (FakeTensorMode enters it under avoid_device_init)
    lib = guard_library()
    if isinstance(lib, OSError):
        return TritonTraceError(f"torch.compile under triton_trace's CUDA redirect needs a C++ compiler (c++, g++ "
                                f"or clang++) once, to build the CUDA device guard a CPU-only torch lacks: {lib}")
    if lib.tt_guard_install():
        scope.on_restore(lib.tt_guard_remove)
    return None
