"""A kernel's @triton.jit(do_not_specialize=...) is honoured when the traced kernel is compiled for a GPU: the
GPU's launcher leaves those parameters unspecialized (an int of value 1 stays an i32 argument, a multiple of
16 gets no divisibility hint), so the compiled layouts and vector widths the analysis reads are the GPU's.
The expectation is Triton's own: the same kernel compiled straight with triton.compile for sm_90."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache_nospec"))


@triton.jit(do_not_specialize=["pitch", "one"], do_not_specialize_on_alignment=["n"])
def _rows_unspecialized(x_ptr, y_ptr, pitch, one, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    tl.store(y_ptr + row * pitch + cols * one, tl.load(x_ptr + row * pitch + cols * one, mask=m), mask=m)


@triton.jit
def _rows_specialized(x_ptr, y_ptr, pitch, one, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    tl.store(y_ptr + row * pitch + cols * one, tl.load(x_ptr + row * pitch + cols * one, mask=m), mask=m)


def _traced(kernel):
    x = torch.randn(4, 512)
    y = torch.zeros_like(x)
    triton_trace.reset()
    triton_trace.trace(kernel)[(4,)](x, y, 512, 1, 512, BLOCK=512)     # 4 elements a thread (4 warps)
    assert torch.equal(y, x)
    return triton_trace.current_trace().launches[-1]


def _ptx_vector_width(ptx: str) -> int:
    """The widest ld.global vector in the PTX: 4 for ld.global.v4, 1 for a scalar load."""
    import re
    widths = [int(w) for w in re.findall(r"ld\.global(?:\.\w+)*?\.v(\d)", ptx)]
    return max(widths, default=1)


def test_do_not_specialize_reaches_the_compile_and_survives_a_trace_file(tmp_path):
    launch = _traced(_rows_unspecialized)
    assert launch.module.no_specialize == ("pitch", "one")
    assert launch.module.no_specialize_alignment == ("n",)
    c = launch.compiled("sm_90")
    # as Triton's launcher would: 'one' (value 1) stays an argument, 'pitch' (512) gets no divisibility hint
    assert c.signature["one"] == "i32" and c.signature["pitch"] == "i32"
    assert "pitch" not in c.divisible_by_16 and "n" not in c.divisible_by_16
    path = tmp_path / "t.ttrace"
    triton_trace.save(triton_trace.current_trace(), str(path))
    back = triton_trace.load(str(path)).launches[-1]
    assert back.module.no_specialize == ("pitch", "one")
    assert back.module.no_specialize_alignment == ("n",)


def test_the_specialized_twin_compiles_as_triton_specializes_it():
    launch = _traced(_rows_specialized)
    assert launch.module.no_specialize == () and launch.module.no_specialize_alignment == ()
    c = launch.compiled("sm_90")
    assert c.signature["one"] == "constexpr"                 # Triton specializes an int equal to 1
    assert "pitch" in c.divisible_by_16 and "n" in c.divisible_by_16
    un = _traced(_rows_unspecialized).compiled("sm_90")
    # the unspecialized kernel cannot prove contiguity (cols * one) and issues narrower loads
    assert _ptx_vector_width(c.ir["ptx"]) > _ptx_vector_width(un.ir["ptx"])
