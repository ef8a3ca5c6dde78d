"""What only a GPU runs, met inside a test or a fixture: each such test is skipped, "requires a GPU: ..."."""
import torch
import torch.utils.cpp_extension

from kernels import warp_swap


def test_inline_asm_in_a_helper(device):
    x = torch.randn(100, device=device)
    assert sorted(warp_swap(x).tolist()) == sorted(x.tolist())    # lanes trade values in pairs


def test_inline_asm_in_a_fixture(swapped_table):
    assert swapped_table.shape == (8,)


def test_imports_a_cuda_wheel_inside():
    import needs_libcudart
    assert needs_libcudart


def test_load_inline_with_cuda_sources():
    torch.utils.cpp_extension.load_inline(name="tt_bad_inline", cpp_sources="", cuda_sources="__global__ void k() {}")


def test_allocator_snapshot():
    torch.cuda.memory._record_memory_history()
