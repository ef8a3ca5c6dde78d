"""What a GPU suite asks of torch.cuda and Triton that the CPU answers: the allocator's statistics, the
CUDA version, a loop variable's tensor methods, a bfloat16 output checked by value."""
import pytest
import torch

from kernels import chunk_sum, to_bf16


def test_memory_stats_mem_get_info_summary_and_peaks():
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    big = torch.empty(1 << 20, device="cuda")              # 4 MiB: the large pool
    small = torch.empty(16, device="cuda")                 # 64 B: the small pool
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + big.nbytes + small.nbytes == torch.cuda.memory_allocated()
    assert stats["allocated_bytes.large_pool.current"] >= big.nbytes
    assert stats["allocated_bytes.small_pool.current"] >= small.nbytes
    assert stats["reserved_bytes.all.current"] == torch.cuda.memory_reserved()
    assert stats["num_ooms"] == stats["num_alloc_retries"] == 0 and stats["active.all.current"] >= 2
    assert torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] == stats[
        "allocated_bytes.all.current"]
    assert torch.cuda.memory.memory_stats() == stats            # the same through torch.cuda.memory
    free, total = torch.cuda.mem_get_info()
    assert total == torch.cuda.get_device_properties(0).total_memory and free == total - stats[
        "allocated_bytes.all.current"]
    assert torch.cuda.memory.mem_get_info(0) == (free, total)
    summary = torch.cuda.memory_summary()
    assert "Allocated memory" in summary and "H200" in summary
    peak = torch.cuda.max_memory_allocated()
    del big
    assert torch.cuda.max_memory_allocated() == peak > torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()


def test_torch_version_cuda():
    assert torch.version.cuda is not None and tuple(map(int, torch.version.cuda.split("."))) >= (12, 0)


def test_loop_variable_to_int64():
    x = torch.randn(3, 40, device="cuda")
    expect = torch.nn.functional.pad(x, (0, 8)).reshape(3, 3, 16).sum(1)
    torch.testing.assert_close(chunk_sum(x), expect)


def test_bf16_output_in_range():
    x = torch.tensor([-2.109375, 1.0, 3e4, -7.5, 1e38] * 20, device="cuda")
    assert torch.equal(to_bf16(x), x.to(torch.bfloat16))


@pytest.mark.triton_trace(expect="overflow")
def test_bf16_output_overflows():
    x = torch.tensor([1.0, 3.4e38, -3.4e38, 2.0], device="cuda")
    assert torch.isinf(to_bf16(x)).sum() == 2


def test_a_minus_inf_input_on_purpose_does_not_fail():
    # a GPU suite feeds -inf on purpose (a masked softmax's gradient): the nonfinite_input warning is no error
    x = torch.tensor([1.0, float("-inf"), 2.0, float("inf")] * 8, device="cuda")
    assert torch.equal(to_bf16(x), x.to(torch.bfloat16))
