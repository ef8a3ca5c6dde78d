"""What real GPU libraries need from the CUDA redirect (issue 40, "How it is measured"), each on a small
pattern of our own: a library that registers its Triton-backed ops for the CUDA dispatch key (as FlagGems'
``use_gems()`` does), CUDA factories reached where no torch function mode sees them (inside a backward),
a library wrapper that caches what ``kernel.run`` returned and launches it later as ``compiled[grid](...)``
(FlagGems' LibEntry), its own autotuner subclass with its own ``run``, tensor-like arguments over a CUDA
tensor's memory, bfloat16 constants on Triton 3.6, and torch._dynamo imported while the redirect is on."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.suite import CudaTensor, cuda_on_cpu


@triton.jit
def negate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    scale: tl.constexpr = 0.5
    tl.store(out_ptr + offs, x * scale, mask=m)


CALLS: list = []


def triton_neg(x):
    CALLS.append("neg")
    out = torch.empty_like(x)
    # what the library makes from its CUDA arguments is CUDA, as on a GPU (FlagGems' flash attention checks),
    # a constant made on the argument's device too (FlagGems' complex add)
    assert out.is_cuda and out.device.type == "cuda" and (out + 1).is_cuda
    assert torch.tensor([0.0, 1.0], device=x.device).is_cuda
    negate_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def triton_abs(x):
    CALLS.append("abs")
    return torch.where(x < 0, torch.neg(x), x)      # reaches the library's neg too, as on a GPU


@pytest.fixture
def library():
    """A tiny library: aten::neg and aten::abs registered for the CUDA key, removed afterwards."""
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("neg", triton_neg, "CUDA")
    lib.impl("abs", triton_abs, "CUDA")
    CALLS.clear()
    yield lib
    lib._destroy()


def test_ops_registered_for_cuda_run_the_library_kernel(library):
    with cuda_on_cpu():
        x = torch.randn(100, device="cuda")
        y = torch.neg(x)
        z = -x
        assert isinstance(y, CudaTensor) and y.is_cuda
        assert torch.equal(y.cpu(), -x.cpu()) and torch.equal(z.cpu(), -x.cpu())
        assert CALLS == ["neg", "neg"]
        assert [lc.kernel_name for lc in triton_trace.current_trace().launches] == ["negate_kernel"] * 2
        torch.sin(x)                                  # no registration: torch's own kernel, no launch
        torch.neg(x.cpu())                            # a CPU tensor: torch's own kernel
        assert CALLS == ["neg", "neg"] and len(triton_trace.current_trace().launches) == 2


def test_a_library_op_calling_another_reaches_it(library):
    with cuda_on_cpu():
        x = torch.randn(50, device="cuda")
        y = torch.abs(x)
        assert torch.equal(y.cpu(), x.cpu().abs())
        assert CALLS == ["abs", "neg"]


def triton_add(a, b, *, alpha=1):
    CALLS.append(("add", type(a).__name__, type(b).__name__))
    # no torch.add on CUDA tensors in here: it is this kernel's own op, as on a GPU
    return torch.sub(b * alpha, -torch.neg(torch.neg(a)) if isinstance(a, torch.Tensor) else -a)


def test_a_scalar_for_a_tensor_argument_reaches_the_kernel_as_a_number():
    lib = torch.library.Library("aten", "IMPL")
    try:
        with cuda_on_cpu():
            lib.impl("add.Tensor", triton_add, "CUDA")      # registered while the redirect is on
            CALLS.clear()
            x = torch.randn(16, device="cuda")
            y = torch.add(2.5, x)                           # a wrapped number where the schema says Tensor
            assert torch.equal(y.cpu(), 2.5 + x.cpu())
            assert CALLS[0] == ("add", "float", "CudaTensor")
    finally:
        lib._destroy()


def test_an_op_torch_has_only_for_cuda_needs_a_gpu():
    from triton_trace.errors import RequiresGPU
    with cuda_on_cpu():
        q = torch.randn(1, 2, 16, 16, device="cuda")
        with pytest.raises(RequiresGPU, match="_scaled_dot_product_flash_attention"):
            torch.ops.aten._scaled_dot_product_flash_attention(q, q, q)


def test_without_a_registration_the_op_is_torch_s():
    with cuda_on_cpu():
        x = torch.randn(10, device="cuda")
        assert torch.equal(torch.neg(x).cpu(), -x.cpu())
        assert not triton_trace.current_trace().launches


class _EmptyInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty(grad.shape, device=grad.device)    # device="cuda", inside the autograd engine
        out.copy_(grad * 2)
        return out


def test_cuda_factories_inside_a_backward_land_on_the_cpu():
    with cuda_on_cpu():
        x = torch.randn(8, device="cuda", requires_grad=True)
        (g,) = torch.autograd.grad(_EmptyInBackward.apply(x).sum(), x)
        assert isinstance(g, CudaTensor) and torch.equal(g.cpu(), torch.full((8,), 2.0))


# ---- patterns that need the changes to record/ and suite/cudaapi.py proposed in the report -----------------
class CachingEntry(triton.KernelInterface):
    """Like FlagGems' LibEntry: the first call runs ``fn.run`` and keeps what it returned, with the config
    the autotuner chose; later calls launch that object as ``compiled[grid](*all parameters)``."""

    def __init__(self, fn):
        self.fn = fn
        self.cache = {}

    def run(self, *args, grid, **kwargs):
        key = tuple(a.dtype if hasattr(a, "dtype") else a for a in args)
        if key not in self.cache:
            compiled = self.fn.run(*args, grid=grid, **kwargs)
            self.cache[key] = (compiled, dict(self.fn.best_config.kwargs))
            return compiled
        compiled, constexprs = self.cache[key]
        g = grid(constexprs) if callable(grid) else grid
        compiled[g](*args, constexprs["BLOCK"])
        return compiled


class OwnTuner(triton.runtime.Autotuner):
    """A library's autotuner with its own ``run`` that times every config (never reached when routed)."""

    def run(self, *args, **kwargs):
        raise AssertionError("the library's own benchmarking ran")


def own_autotune(configs, key):
    def decorator(fn):
        return OwnTuner(fn, fn.arg_names, configs, key, reset_to_zero=None, restore_value=None)
    return decorator


@own_autotune([triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def tuned_negate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=m), mask=m)


def test_a_caching_wrapper_relaunches_what_run_returned_through_the_interpreter():
    entry = CachingEntry(tuned_negate)
    with cuda_on_cpu():
        for _ in range(3):
            x = torch.randn(300, device="cuda")
            out = torch.empty_like(x)
            entry[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, out, 300)
            assert torch.equal(out.cpu(), -x.cpu())
        launches = triton_trace.current_trace().launches
        assert [lc.kernel_name for lc in launches] == ["tuned_negate"] * 3
        assert all(lc.grid == (10, 1, 1) for lc in launches)          # BLOCK=32: the first config, every time


def test_resize_after_a_launch_and_of_a_poisoned_empty():
    with cuda_on_cpu(poison_empty=True):
        x = torch.zeros(100, device="cuda")
        negate_kernel[(2,)](x, x, 100, BLOCK=64)
        x.resize_(1000)                                  # a GPU tensor's storage stays resizable
        e = torch.empty(1, device="cuda")
        e.set_(e.untyped_storage(), 0, (32,))            # FlagGems' resize_ of an out= tensor
        assert e.shape == (32,)


def test_cuda_generator_state_is_philox_seed_and_offset():
    with cuda_on_cpu():
        gen = torch.cuda.default_generators[0]
        gen.manual_seed(1234)
        state = gen.get_state()
        assert state.dtype == torch.uint8 and state.numel() == 16
        state.view(torch.int64)[1] = 64                    # a library advances the offset itself
        gen.set_state(state)
        assert gen.get_state().view(torch.int64).tolist() == [1234, 64]
        a = torch.randn(4, device="cuda")
        torch.cuda.manual_seed(1234)
        assert torch.equal(torch.randn(4, device="cuda").cpu(), a.cpu())


class StridedView:
    """A library's tensor-like (FlagGems' StridedBuffer): data_ptr, dtype, shape, strides, device, and the
    storage of the tensor it views."""

    def __init__(self, base):
        self.base, self.dtype, self.shape, self.device = base, base.dtype, tuple(base.shape), base.device

    def data_ptr(self):
        return self.base.data_ptr()

    def stride(self):
        return self.base.stride()

    def untyped_storage(self):
        return self.base.untyped_storage()


def test_tensor_likes_over_cuda_tensors_are_found():
    with cuda_on_cpu():
        x = torch.randn(100, device="cuda")
        out = torch.empty_like(x)
        negate_kernel[(2,)](StridedView(x), StridedView(out), 100, BLOCK=64)
        assert torch.equal(out.cpu(), -x.cpu())


def test_bfloat16_constants_compute_as_compiled():
    with cuda_on_cpu():
        x = torch.randn(64, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        scale_kernel[(1,)](x, out, 64, BLOCK=64)
        assert torch.equal(out.cpu(), x.cpu() * 0.5)


def test_torch_dynamo_imports_while_the_redirect_is_on():
    import subprocess
    import sys
    code = ("from triton_trace.suite import cuda_on_cpu\n"
            "with cuda_on_cpu():\n    import torch._dynamo\nprint('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "ok", r.stderr[-2000:]
