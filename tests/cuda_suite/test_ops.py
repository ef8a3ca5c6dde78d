"""Tests written for a GPU: CUDA factories, .cuda(), synchronize, device checks, a persistent grid from the
SM count, an autotuned kernel pruned by the device, do_bench. Under ``pytest --tt-cuda`` they run on the CPU."""
import pytest
import torch
import triton
import triton.testing

from conftest import CAPABILITY, SMS
from kernels import add, persistent_sum, row_softmax

DEVICE = "cuda"


@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_add(n):
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device="cuda:0")
    out = add(x, y)
    torch.cuda.synchronize()
    assert out.is_cuda and out.device.type == "cuda"
    torch.testing.assert_close(out, x + y)


def test_add_moved_with_cuda_and_to():
    x = torch.arange(300, dtype=torch.float32).cuda()
    y = torch.ones(300).to("cuda")
    z = torch.ones(300).to(device=torch.device("cuda", 0))
    out = add(add(x, y), z)
    assert out.cpu().device.type == "cpu"
    assert torch.equal(out.cpu(), torch.arange(300, dtype=torch.float32) + 2)


def test_persistent_grid_uses_the_sm_count(device):
    assert SMS == torch.cuda.get_device_properties(0).multi_processor_count > 0
    x = torch.randn(100_000, device=device)
    torch.testing.assert_close(persistent_sum(x), x.sum(), rtol=1e-4, atol=1e-3)


def test_autotuned_softmax_pruned_by_the_device():
    x = torch.randn(16, 100, device=DEVICE)
    torch.testing.assert_close(row_softmax(x), torch.softmax(x, dim=1))


@pytest.mark.skipif(CAPABILITY < (8, 0), reason="needs Ampere or newer")
def test_capability_read_at_import():
    assert torch.cuda.get_device_capability() == CAPABILITY
    assert triton.runtime.driver.active.get_current_target().arch == CAPABILITY[0] * 10 + CAPABILITY[1]


def test_benchmark_style():
    x = torch.randn(1 << 16, device=DEVICE)
    y = torch.randn(1 << 16, device=DEVICE)
    ms = triton.testing.do_bench(lambda: add(x, y))
    gbps = 3 * x.numel() * x.element_size() / ms * 1e-6
    assert ms > 0 and gbps > 0


def test_streams_events_and_memory():
    stream = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with torch.cuda.stream(stream):
        start.record()
        out = add(torch.ones(1024, device=DEVICE), torch.ones(1024, device=DEVICE))
        end.record()
    stream.synchronize()
    assert start.elapsed_time(end) >= 0
    assert torch.cuda.max_memory_allocated() >= before + 3 * 1024 * 4
    assert torch.cuda.memory_stats()["allocated_bytes.all.peak"] == torch.cuda.max_memory_allocated()
    assert out.sum().item() == 2048


def test_seeded_inputs_repeat():
    torch.cuda.manual_seed(0)
    a = torch.randn(64, device=DEVICE)
    torch.cuda.manual_seed(0)
    b = torch.randn(64, device=DEVICE)
    g = torch.Generator(device="cuda").manual_seed(1)
    c = torch.rand(8, device=DEVICE, generator=g)
    assert torch.equal(add(a, b), a * 2) and c.is_cuda


def test_autocast_casts_the_matmul():
    a, b = torch.randn(16, 16, device=DEVICE), torch.randn(16, 16, device=DEVICE)
    with torch.autocast("cuda", dtype=torch.float16):
        assert (a @ b).dtype == torch.float16
    assert add(a, b).dtype == torch.float32


def test_torch_only_is_hollow():
    x = torch.randn(10, device=DEVICE)
    assert torch.equal(x + 0, x)


def test_cuda_graph_needs_a_gpu():
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        add(torch.ones(4, device=DEVICE), torch.ones(4, device=DEVICE))


def test_inline_ptx_runs_traced():
    from kernels import fast_exp_kernel
    x = torch.randn(64, device=DEVICE)
    out = torch.empty_like(x)
    fast_exp_kernel[(1,)](x, out, 64, BLOCK=64)
    torch.testing.assert_close(out, torch.exp2(x))


def test_memory_stats_are_answered():
    x = torch.empty(1 << 10, device=DEVICE)
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] >= x.numel() * 4 and stats["num_ooms"] == 0
