"""The CUDA redirect (triton_trace.suite.cuda_on_cpu) on its own: every way to make or move a CUDA tensor
lands on the CPU and computes exactly what plain CPU torch computes; torch.cuda and Triton's driver answer
as the chosen GPU of the analysis's table; everything is put back afterwards, also after an error; and
poisoned torch.empty (record/memory/poison.py) gives uninitialised reads without declarations."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import triton
import triton.language as tl
import triton.testing

import triton_trace
from triton_trace.analysis.gpus import GPUS
from triton_trace.errors import NoSuchDevice, RequiresGPU, TraceUsageError
from triton_trace.record.memory import poison
from triton_trace.suite import CudaTensor, PredictedTime, cuda_on_cpu


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m), mask=m)


def _same(got, want):
    assert isinstance(got, CudaTensor) and got.is_cuda and got.device == torch.device("cuda", 0)
    plain = got.cpu()
    assert type(plain) is torch.Tensor and plain.device.type == "cpu"
    assert plain.dtype == want.dtype and plain.shape == want.shape and plain.stride() == want.stride()
    assert torch.equal(plain, want) if not want.is_floating_point() else \
        torch.equal(plain.nan_to_num(7.0), want.nan_to_num(7.0))


# Each factory as a test calls it, with the device given every way torch accepts; seeded where random.
FACTORIES = [
    ("zeros", lambda d: torch.zeros(3, 4, device=d)), ("ones", lambda d: torch.ones(5, dtype=torch.int32, device=d)),
    ("full", lambda d: torch.full((2, 3), 1.5, device=d)), ("arange", lambda d: torch.arange(10, device=d)),
    ("linspace", lambda d: torch.linspace(0, 1, 7, device=d)), ("eye", lambda d: torch.eye(4, device=d)),
    ("tensor", lambda d: torch.tensor([[1, 2], [3, 4]], device=d)),
    ("as_tensor", lambda d: torch.as_tensor([1.0, 2.0], device=d)),
    ("randn", lambda d: torch.randn(4, 4, device=d)), ("rand", lambda d: torch.rand(6, device=d)),
    ("randint", lambda d: torch.randint(0, 10, (8,), device=d)), ("randperm", lambda d: torch.randperm(9, device=d)),
    ("empty_strided", lambda d: torch.empty_strided((2, 3), (1, 2), device=d).fill_(2.0)),
    ("zeros_like", lambda d: torch.zeros_like(torch.ones(2, 2), device=d)),
    ("randn_like", lambda d: torch.randn_like(torch.ones(3), device=d)),
    ("full_like", lambda d: torch.full_like(torch.ones(3), 4.0, device=d)),
]


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 0), 0])
@pytest.mark.parametrize("name,make", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factories_land_on_the_cpu_with_the_values_cpu_torch_makes(name, make, device):
    torch.manual_seed(0)
    want = make("cpu")
    with cuda_on_cpu(poison_empty=False):
        torch.manual_seed(0)
        got = make(device)
    _same(got, want)


def test_ops_compute_what_cpu_torch_computes_and_stay_cuda():
    torch.manual_seed(1)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    ref = [a @ b, torch.softmax(a, 1), a.sum(0), a[2:5, ::2] * 3, torch.where(a > 0, a, b), a.max(1).values,
           torch.cat([a, b]).T.contiguous(), torch.nn.functional.gelu(b)]
    with cuda_on_cpu():
        x, y = a.cuda(), b.to("cuda")
        got = [x @ y, torch.softmax(x, 1), x.sum(0), x[2:5, ::2] * 3, torch.where(x > 0, x, y), x.max(1).values,
               torch.cat([x, y]).T.contiguous(), torch.nn.functional.gelu(y)]
        x.add_(1)                                     # in place, still the same CUDA tensor
        assert torch.equal(x.cpu(), a + 1) and isinstance(x, CudaTensor)
    for g, w in zip(got, ref):
        _same(g, w)


def test_moves_copy_as_between_a_gpu_and_its_host():
    with cuda_on_cpu():
        host = torch.ones(4)
        dev = host.cuda()
        dev += 1
        assert torch.equal(host, torch.ones(4))                # .cuda() copied
        back = dev.cpu()
        back += 1
        assert torch.equal(dev.cpu(), torch.full((4,), 2.0))   # .cpu() copied
        assert dev.to("cuda") is dev and dev.cuda() is dev and dev.to(dev) is dev
        half = dev.to(torch.float16)
        assert half.is_cuda and half.dtype == torch.float16
        assert host.to(device="cuda", dtype=torch.float64).dtype == torch.float64
        assert type(dev.to("cpu")) is torch.Tensor and dev.to("meta").device.type == "meta"
        assert dev.new_zeros(3).is_cuda and not dev.new_zeros(3, device="cpu").is_cuda
        assert dev.new_tensor([1, 2]).is_cuda and torch.empty_like(dev).is_cuda
        assert dev.type() == "torch.cuda.FloatTensor" and dev.get_device() == 0
        assert host.type() == "torch.FloatTensor" and host.type("torch.cuda.DoubleTensor").is_cuda
        with pytest.raises(NoSuchDevice, match="device_count"):
            torch.zeros(2, device="cuda:1")


@pytest.mark.filterwarnings("ignore::FutureWarning")      # torch.cuda.amp.autocast, as older suites call it
def test_default_device_copies_and_amp():
    with cuda_on_cpu():
        with torch.device("cuda"):
            assert torch.randn(3).is_cuda
        torch.set_default_device("cuda")
        assert torch.zeros(2).is_cuda and torch.get_default_device() == torch.device("cuda", 0)
        torch.set_default_device(None)
        assert not torch.zeros(2).is_cuda
        x = torch.randn(4, device="cuda", requires_grad=True)
        y = copy.deepcopy(x)
        assert y.is_cuda and y.is_leaf and y.requires_grad and torch.equal(y, x) and y.data_ptr() != x.data_ptr()
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale((x * 2).sum()).backward()
        assert scaler.is_enabled() and x.grad.is_cuda
        with torch.cuda.amp.autocast():
            assert (x.detach().view(2, 2) @ x.detach().view(2, 2)).dtype == torch.float16
    assert torch.get_default_device().type == "cpu"


def test_autograd_leaves_parameters_and_modules():
    with cuda_on_cpu():
        w = torch.randn(3, device="cuda", requires_grad=True)
        (w * w).sum().backward()
        assert w.is_leaf and w.grad.is_cuda and torch.equal(w.grad.cpu(), 2 * w.detach().cpu())
        model = torch.nn.Linear(4, 2).cuda()
        assert model.weight.is_cuda and isinstance(model.weight, torch.nn.Parameter)
        out = model(torch.randn(5, 4, device="cuda"))
        out.sum().backward()
        assert out.is_cuda and model.weight.grad.is_cuda


def test_generator_and_rng_state():
    with cuda_on_cpu():
        g = torch.Generator(device="cuda")
        assert g.device.type == "cuda" and isinstance(g, torch.Generator)
        assert isinstance(torch.default_generator, torch.Generator)
        g.manual_seed(3)
        a = torch.randn(5, device="cuda", generator=g)
        g.manual_seed(3)
        assert torch.equal(a, torch.randn(5, device="cuda", generator=g))
        state = torch.cuda.get_rng_state()
        b = torch.rand(4, device="cuda")
        torch.cuda.set_rng_state(state)
        assert torch.equal(b, torch.rand(4, device="cuda"))
        with torch.random.fork_rng():
            torch.rand(100, device="cuda")
        # CUDA's generator: the CPU's, or (with its Philox (seed, offset) state) one drawing from the CPU's
        cuda_gen = torch.cuda.default_generators[0]
        assert cuda_gen is torch.default_generator or cuda_gen.cpu is torch.default_generator


@pytest.mark.parametrize("key", sorted(GPUS))
def test_torch_cuda_and_triton_answer_as_the_chosen_gpu(key):
    g = GPUS[key]
    with cuda_on_cpu(key) as redirect:
        assert redirect.key == key and torch.cuda.is_available() and torch.cuda.device_count() == 1
        p = torch.cuda.get_device_properties(0)
        assert (p.name, p.multi_processor_count, p.total_memory, p.L2_cache_size) == \
            (g.device_name, g.sms, g.total_memory, g.l2_bytes)
        assert torch.cuda.get_device_capability() == (p.major, p.minor) == divmod(g.arch, 10)
        assert torch.cuda.get_device_name() == g.device_name and torch.cuda.current_device() == 0
        driver = triton.runtime.driver.active
        assert driver.get_current_target().arch == g.arch and driver.get_current_device() == 0
        assert driver.get_active_torch_device() == torch.device("cuda", 0)
        props = driver.utils.get_device_properties(0)
        assert props["multiprocessor_count"] == g.sms and props["max_shared_mem"] == g.shared_mem_optin
        # Triton's own bandwidth formula gives back the table's bandwidth
        assert triton.testing.get_dram_gbps() == pytest.approx(g.dram_bytes_per_s / 1e9, rel=1e-3)
    with pytest.raises(TraceUsageError, match="H200"):
        with cuda_on_cpu("B9000"):
            pass


def test_memory_counts_live_cuda_storages():
    with cuda_on_cpu(poison_empty=False):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        x = torch.empty(1000, device="cuda")
        view = x[10:]
        assert torch.cuda.memory_allocated() == base + 4000                     # a view adds nothing
        y = torch.empty(500, dtype=torch.float64, device="cuda")
        peak = torch.cuda.max_memory_allocated()
        assert peak == base + 8000
        del x, y
        assert torch.cuda.memory_allocated() == base + 4000                     # the view keeps x's storage
        del view
        assert torch.cuda.memory_allocated() == base and torch.cuda.max_memory_allocated() == peak
        stats = torch.cuda.memory_stats()
        assert stats["allocated_bytes.all.peak"] == peak and stats["num_ooms"] == 0
        free, total = torch.cuda.mem_get_info()
        assert total == GPUS["H200"].total_memory and free == total - base


def test_streams_events_nvtx_and_what_needs_a_gpu():
    with cuda_on_cpu():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            assert torch.cuda.current_stream() == s
        assert torch.cuda.current_stream() == torch.cuda.default_stream()
        e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e1.record()
        e2.record(s)
        assert e2.query() and e1.elapsed_time(e2) >= 0
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        with torch.cuda.device(0), torch.cuda.nvtx.range("region"):
            torch.cuda.nvtx.range_push("x")
            torch.cuda.nvtx.range_pop()
        torch.ones(2, device="cuda").record_stream(s)
        with pytest.raises(RequiresGPU, match="requires a GPU: CUDA graphs"):
            torch.cuda.CUDAGraph()
        with pytest.raises(RequiresGPU, match="utilization"):
            torch.cuda.utilization()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_on_cuda_casts_as_cpu_autocast_does(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    with torch.autocast("cpu", dtype=dtype):
        want = a @ b
    with cuda_on_cpu():
        x, y = a.cuda(), b.cuda()
        with torch.autocast("cuda", dtype=dtype):
            got = x @ y
            assert torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == dtype
            with torch.autocast("cuda", enabled=False):
                assert (x @ y).dtype == torch.float32
        assert (x @ y).dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
    _same(got, want)


def test_kernels_run_through_the_interpreter_traced_or_not():
    with cuda_on_cpu():
        x, y = torch.randn(300, device="cuda"), torch.randn(300, device="cuda")
        out = torch.empty_like(x)
        add_kernel[(3,)](x, y, out, 300, BLOCK=128)
        assert torch.equal(out.cpu(), x.cpu() + y.cpu())
    launch, = triton_trace.current_trace().launches
    assert launch.kernel_name == "add_kernel" and launch.tensors[0].device == "cuda:0"
    triton_trace.reset()
    with cuda_on_cpu(trace=False):
        out2 = torch.zeros(300, device="cuda")
        add_kernel[(3,)](x, y, out2, 300, BLOCK=128)
        assert torch.equal(out2.cpu(), out.cpu())
    assert not triton_trace.current_trace().launches
    traced = triton_trace.trace(triton.jit(add_kernel.fn))        # @trace keeps its own run: same memory
    with cuda_on_cpu():
        out3 = torch.zeros(300, device="cuda")
        traced[(3,)](x, y, out3, 300, BLOCK=128)
        assert torch.equal(out3.cpu(), out.cpu())


@triton.jit
def template_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)  # noqa: F841 (the replaced source uses it)
    tl.store(out_ptr + offs, GENERATE_TEST_HERE, mask=offs < n)  # noqa: F821 (replaced before a launch)


def test_a_kernel_whose_source_was_replaced_runs_the_new_source():
    """Triton's own tests make kernels from a template this way when they run on a GPU (patch_kernel)."""
    before = triton.JITFunction._unsafe_update_src
    with cuda_on_cpu():
        triton_trace.reset()
        kernel = triton.JITFunction(template_kernel.fn)
        kernel._unsafe_update_src(kernel.src.replace("GENERATE_TEST_HERE", "x * 3 + 1"))
        x = torch.randn(300, device="cuda")
        out = torch.empty_like(x)
        kernel[(3,)](x, out, 300, BLOCK=128)
        launch, = triton_trace.current_trace().launches
    assert torch.equal(out.cpu(), x.cpu() * 3 + 1)
    # the template's line numbers: the store is the 5th line of the def, as in this file
    store_line = template_kernel.fn.__code__.co_firstlineno + 4
    assert "source replaced" in launch.source_file and "x * 3 + 1" in launch.source
    assert {a.line for a in launch.accesses(kind="store")} == {store_line}
    assert triton.JITFunction._unsafe_update_src is before          # put back


def test_do_bench_answers_a_predicted_time():
    with cuda_on_cpu("H100"):
        x, y = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
        out = torch.empty_like(x)
        ms = triton.testing.do_bench(lambda: add_kernel[(64,)](x, y, out, 1 << 16, BLOCK=1024))
        assert isinstance(ms, PredictedTime) and ms.predicted and "roofline" in ms.how and "H100" in ms.how
        # 3 x 256 KiB of DRAM traffic at the H100's 3.35 TB/s: the memory bound, in ms
        assert float(ms) == pytest.approx(3 * (1 << 18) / GPUS["H100"].dram_bytes_per_s * 1e3, rel=0.05)
        q = triton.testing.do_bench(lambda: add_kernel[(64,)](x, y, out, 1 << 16, BLOCK=1024), quantiles=[0.5, 0.2])
        assert len(q) == 2 and q[0] == ms
        torch_only = triton.testing.do_bench(lambda: x + y)
        assert torch_only > 0 and "measured on the CPU" in torch_only.how
        assert triton.runtime.driver.active.get_benchmarker() is triton.testing.do_bench


def test_everything_is_put_back_also_after_an_error():
    before = (torch.Generator, triton.testing.do_bench, torch.cuda.is_available, torch.autocast.__enter__,
              torch.__future__.get_overwrite_module_params_on_conversion())
    with pytest.raises(ZeroDivisionError):
        with cuda_on_cpu(poison_empty=True):
            torch.empty(3, device="cuda")
            1 / 0
    after = (torch.Generator, triton.testing.do_bench, torch.cuda.is_available, torch.autocast.__enter__,
             torch.__future__.get_overwrite_module_params_on_conversion())
    assert before == after and not torch.cuda.is_available()
    assert not torch.overrides._get_current_function_mode_stack()
    with pytest.raises((AssertionError, RuntimeError)):
        torch.zeros(1, device="cuda")
    with pytest.raises(RuntimeError, match="active drivers"):
        triton.runtime.driver.active.get_current_target()


# --------------------------------------------------------------------------------------------------------
# poison_empty
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.int64, torch.uint8])
def test_empty_is_poisoned_with_a_pattern_of_its_own(dtype):
    with triton_trace.trace_all(poison_empty=True):
        t = torch.empty(17, dtype=dtype)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    raw = {int(v) & ((1 << 8 * t.element_size()) - 1) for v in t.view(bits).tolist()}
    assert raw == {poison.pattern_of(dtype)}
    if dtype.is_floating_point:
        assert torch.isnan(t).all()
        assert raw != {int(torch.tensor(math.nan, dtype=dtype).view(bits).item()) & ((1 << 8 * t.element_size()) - 1)}
    assert poison.still_poisoned(t)
    t[3] = 0
    assert not poison.still_poisoned(t)


def test_a_read_of_poisoned_empty_is_an_uninitialized_read_without_declarations():
    with triton_trace.trace_all(poison_empty=True):
        x = torch.ones(100)
        fresh = torch.empty(100)
        accumulate_kernel[(2,)](x, fresh, 100, BLOCK=64)               # reads garbage
        theirs = torch.empty(100).fill_(float("nan"))                  # the suite's own NaN fill: stacks
        half = torch.empty(100)
        half[:50] = 0                                                  # written in part: not undefined
        zeros = torch.zeros(100)
        accumulate_kernel[(2,)](x, zeros, 100, BLOCK=64)
        filled = torch.empty(100)
        add_kernel[(1,)](x, x, filled, 100, BLOCK=128)                 # written whole, read never
    launches = triton_trace.current_trace().launches
    assert [la.meta.get("poisoned") for la in launches] == [["out_ptr"], None, ["out_ptr"]]
    assert launches[0].outputs == ()                                   # nothing declared
    report = triton_trace.analyze(triton_trace.current_trace(), layouts="model", what_if=False)
    kinds = {(f.kind, f.launch) for f in report.findings}
    assert kinds == {("uninitialized_read", 0)}
    assert "never-written torch.empty result 'out_ptr'" in report.findings[0].message
    assert not poison.still_poisoned(theirs) and not poison.still_poisoned(half)
    assert not poison.still_poisoned(filled)
    # garbage in, garbage out: NaN + 1 keeps the poison's payload, so what the kernel stored is poison still
    assert poison.still_poisoned(fresh)


def test_poison_is_off_unless_asked():
    with triton_trace.trace_all():
        t = torch.empty(8)
    assert not poison.still_poisoned(t)


@triton.jit
def _quoted_constexpr_kernel(x_ptr, out_ptr, n, BLOCK: "tl.constexpr"):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_a_quoted_constexpr_under_future_annotations():
    """This file has ``from __future__ import annotations``: ``BLOCK: "tl.constexpr"`` is the text
    ``'tl.constexpr'``, a constexpr to the compiler, and must be one to the tracer too."""
    x = torch.randn(100)
    out = torch.empty_like(x)
    triton_trace.trace(_quoted_constexpr_kernel)[(2,)](x, out, 100, BLOCK=64)
    assert torch.equal(out, x * 2)
