"""No false positives: every correct kernel of the suite (tests/kernels/) analyses to zero findings, with
its torch.empty results declared as outputs so the uninitialised-read and coverage checks run too."""
import pytest
import torch

import triton_trace
from triton_trace import trace
from helpers.release import TRITON_39
import kernels as K


def _layer_norm_fwd():
    x = torch.randn(6, 40)
    K.layer_norm_fwd(x, torch.randn(40), torch.randn(40), block=16,
                     kernel=trace(K.make_layer_norm_fwd(), outputs=("Y", "Mean", "Rstd")))


def _layer_norm_bwd():
    x, w = torch.randn(12, 24), torch.randn(24)
    _, mean, rstd = K.layer_norm_fwd(x, w, torch.randn(24), kernel=trace(K.make_layer_norm_fwd()))
    triton_trace.reset()
    K.layer_norm_bwd(torch.randn(12, 24), x, w, mean, rstd, group_size_m=4,
                     dx_kernel=trace(K.make_layer_norm_bwd_dx(), outputs=("DX",)),
                     dwdb_kernel=trace(K.make_layer_norm_bwd_dwdb(), outputs=("FINAL_DW", "FINAL_DB")))


CLEAN = {
    "vector_add": lambda: K.add(torch.randn(1000), torch.randn(1000), kernel=trace(K.make_add(), outputs=("out_ptr",))),
    "bias_none": lambda: K.scale_bias(torch.randn(100), None, kernel=trace(K.make_bias(), outputs=("out_ptr",))),
    "softmax_padded_rows": lambda: K.softmax(torch.randn(5, 64)[:, :50],
                                             kernel=trace(K.make_softmax(), outputs=("out_ptr",))),
    "layer_norm_fwd": _layer_norm_fwd,
    "layer_norm_bwd_with_lock": _layer_norm_bwd,
    "matmul_group_m": lambda: K.matmul(torch.randn(40, 24), torch.randn(24, 36), group_m=2,
                                       kernel=trace(K.make_matmul(), outputs=("c_ptr",))),
    "transpose_of_strided_view": lambda: K.transpose(torch.randn(30, 50)[::2, 3:40],
                                                     kernel=trace(K.make_transpose(), outputs=("y_ptr",))),
    "tensor_descriptor": lambda: K.tensor_desc_add_one(torch.randn(20, 24),
                                                       kernel=trace(K.make_tensor_desc(), outputs=("y_ptr",))),
    "histogram_atomics": lambda: K.histogram(torch.randint(0, 10, (100,), dtype=torch.int32), 10,
                                             kernel=trace(K.make_histogram())),
    "cumsum": lambda: K.cumsum(torch.randn(4, 20), kernel=trace(K.make_cumsum(), outputs=("out_ptr",))),
    "autotune": lambda: K.scale(torch.randn(200), 3.0, kernel=trace(K.make_autotuned(), outputs=("out_ptr",))),
    "heuristics": lambda: K.square(torch.randn(96), kernel=trace(K.make_heuristics(), outputs=("out_ptr",))),
    "nested_helper": lambda: K.poly(torch.randn(70), kernel=trace(K.make_nested(), outputs=("out_ptr",))),
    "grid_3d": lambda: K.sub3d(torch.randn(2, 5, 9), torch.randn(2, 5, 9),
                               kernel=trace(K.make_grid3d(), outputs=("out_ptr",))),
    "runtime_loop_bounds": lambda: K.segment_sum(torch.randn(30), torch.tensor([0, 7, 7, 30], dtype=torch.int32),
                                                 kernel=trace(K.make_segment_sum(), outputs=("out_ptr",))),
    "triton_op": lambda: K.make_triton_op_add(trace(K.make_add(), outputs=("out_ptr",)))(
        torch.randn(150), torch.randn(150)),
}
if not TRITON_39:   # Triton 3.9's interpreter removed block pointers
    CLEAN["block_pointers"] = lambda: K.block_ptr_scale(torch.randn(20, 40),
                                                        kernel=trace(K.make_block_ptr(), outputs=("y_ptr",)))


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_correct_kernel_has_no_findings(name):
    CLEAN[name]()
    tr = triton_trace.current_trace()
    assert len(tr.launches) >= 1 and all(lc.completed for lc in tr.launches)
    report = triton_trace.check(tr)          # raises with the findings listed
    assert report.ok and report.to_dict()["findings"] == []


def test_lock_protected_accumulation_is_recognised():
    """The layer-norm backward's partial dW/dB buffers are read and written by several programs, under a
    lock: without the lock rule those accesses would be races."""
    from triton_trace.analysis.context import LaunchContext, Params
    from triton_trace.analysis.checks.races import lock_of_rows
    _layer_norm_bwd()
    lc = triton_trace.current_trace().launches[0]
    ctx = LaunchContext(lc, 0, Params().resolved())
    locks = lock_of_rows(ctx)
    dw = [i for i in lc.rows(tensor="DW")]
    assert len(dw) > 0 and (locks[dw] >= 0).all()
    assert len(set(locks[dw].tolist())) == 4          # one lock per group of rows
    assert (locks[lc.rows(tensor="X")] == -1).all()   # before the lock is taken
