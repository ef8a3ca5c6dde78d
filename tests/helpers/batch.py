"""Batched against one program at a time: the cases every kernel of tests/kernels runs as (by name), running
one both ways, and the check that two traces are the same to every row, lane and value."""
import numpy as np
import torch

import triton_trace
from triton_trace import trace
import kernels as K
from helpers.release import TRITON_39


def layer_norm_fwd_bwd(kw):
    torch.manual_seed(1)
    M, N = 24, 40
    x, dy, w = torch.randn(M, N), torch.randn(M, N), torch.randn(N)
    _, mean, rstd = K.layer_norm_fwd(x, w, torch.randn(N), kernel=trace(**kw)(K.make_layer_norm_fwd()), block=64)
    return K.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=4, dx_kernel=trace(**kw)(K.make_layer_norm_bwd_dx()),
                            dwdb_kernel=trace(**kw)(K.make_layer_norm_bwd_dwdb()))


# name -> run(trace options) returning the outputs; inputs are seeded, so both modes see the same data
CASES = {
    "add": lambda kw: K.add(torch.randn(1000), torch.randn(1000), kernel=trace(**kw)(K.make_add()), block=64),
    "scale_bias": lambda kw: K.scale_bias(torch.randn(300), torch.randn(300), kernel=trace(**kw)(K.make_bias())),
    "softmax": lambda kw: K.softmax(torch.randn(37, 50)[:, :45], kernel=trace(**kw)(K.make_softmax())),
    "layer_norm_fwd_bwd": layer_norm_fwd_bwd,
    "matmul": lambda kw: K.matmul(torch.randn(40, 24), torch.randn(24, 36), kernel=trace(**kw)(K.make_matmul())),
    "matmul_fp16": lambda kw: K.matmul(torch.randn(32, 32).half(), torch.randn(32, 32).half(),
                                       kernel=trace(**kw)(K.make_matmul())),
    "transpose_view": lambda kw: K.transpose(torch.randn(30, 20).t(), kernel=trace(**kw)(K.make_transpose())),
    "histogram": lambda kw: K.histogram(torch.randint(0, 10, (300,), dtype=torch.int32), 10,
                                        kernel=trace(**kw)(K.make_histogram()), block=32),
    "cumsum": lambda kw: K.cumsum(torch.randn(6, 20), kernel=trace(**kw)(K.make_cumsum())),
    "autotune": lambda kw: K.scale(torch.randn(500), 3.0, kernel=trace(**kw)(K.make_autotuned())),
    "heuristics": lambda kw: K.square(torch.randn(70), kernel=trace(**kw)(K.make_heuristics()), block=32),
    "nested_helper": lambda kw: K.poly(torch.randn(100), kernel=trace(**kw)(K.make_nested())),
    "grid3d": lambda kw: K.sub3d(torch.randn(3, 10, 12), torch.randn(3, 10, 12), kernel=trace(**kw)(K.make_grid3d()),
                                 block_m=4, block_n=8),
    "runtime_loop_bounds": lambda kw: K.segment_sum(torch.randn(50), torch.tensor([0, 3, 3, 20, 41, 50]),
                                                    kernel=trace(**kw)(K.make_segment_sum()), block=8),
    "tensor_descriptor": lambda kw: K.tensor_desc_add_one(torch.randn(20, 24), kernel=trace(**kw)(K.make_tensor_desc())),
    "host_descriptor": lambda kw: K.host_desc_scale(torch.randn(20, 40), kernel=trace(**kw)(K.make_host_desc())),
}
if not TRITON_39:
    CASES["block_pointer"] = lambda kw: K.block_ptr_scale(torch.randn(19, 40), kernel=trace(**kw)(K.make_block_ptr()))
for _name, (_make, _launch, _ref, _inputs, _tol) in getattr(K, "LIBRARY", {}).items():
    CASES[f"library_{_name}"] = (lambda mk, la, inp: lambda kw: la(*inp("cpu"), kernel=trace(**kw)(mk())))(
        _make, _launch, _inputs)


def rows(lc, values=True):
    """Every row of a launch with its lanes and values, independent of where the buffers keep them."""
    out = []
    for a in lc.accesses():
        vals = None if a.values is None or not values else np.asarray(a.values).tobytes()
        out.append((a.program, a.kind, a.tensor, a.file, a.line, a.shape, a.offsets.tobytes(),
                    np.asarray(a.mask).tobytes(), vals))
    return out


def assert_same_traces(seq, bat, values=True):
    assert len(seq.launches) == len(bat.launches)
    for s, b in zip(seq.launches, bat.launches):
        assert (s.kernel_name, s.grid, s.recorded_programs, s.skipped_programs, s.completed) == \
            (b.kernel_name, b.grid, b.recorded_programs, b.skipped_programs, b.completed)
        np.testing.assert_array_equal(s.recorded_ids, b.recorded_ids)
        for col in ("program", "seq", "kind", "file", "line", "tensor", "elem_bytes", "ndim", "shape", "lane_count",
                    "value_dtype", "aux"):
            np.testing.assert_array_equal(s.ops[col], b.ops[col], err_msg=f"{s.kernel_name}: column {col}")
        assert s.files == b.files and s.value_dtypes == b.value_dtypes
        assert rows(s, values) == rows(b, values)


def run_both(run, chunk):
    results = []
    for batch in (False, chunk):
        triton_trace.reset()
        torch.manual_seed(0)
        out = run({"batch": batch})
        results.append((out, triton_trace.current_trace()))
    return results


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_outputs(o)]
    return []


def same_as_one_at_a_time(run):
    """Run ``run`` (given the trace decorator) one program at a time, then batched: outputs to the bit, the
    whole traces, the value reports, the findings and the metrics must be equal. Returns (traces, reports)."""
    traces, outs = [], []
    for batch in (False, True):
        triton_trace.reset()
        torch.manual_seed(0)
        outs.append(run(lambda k: triton_trace.trace(k, batch=batch)))
        traces.append(triton_trace.current_trace())
    assert outs[0].numpy().tobytes() == outs[1].numpy().tobytes()
    assert_same_traces(traces[0], traces[1])
    for s, b in zip(traces[0].launches, traces[1].launches):
        assert s.meta.get("nonfinite") == b.meta.get("nonfinite")
        assert s.meta.get("overflow") == b.meta.get("overflow")
    rep = [triton_trace.analyze(t, layouts="model", what_if=False).to_dict() for t in traces]
    assert rep[0]["findings"] == rep[1]["findings"]
    assert rep[0]["launches"][0]["metrics"] == rep[1]["launches"][0]["metrics"]
    return traces, rep
