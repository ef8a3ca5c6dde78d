"""``triton.testing.do_bench`` under the CUDA redirect: a predicted time, marked as one.

Timing the interpreter says nothing about a GPU, and a constant would make every benchmark agree with
itself. So the function runs once, traced, and the answer is the analysis's roofline time of the
launches it ran on the chosen GPU: for each launch the larger of its DRAM bytes (the L2 simulation's)
over the GPU's bandwidth and its FLOPs over the matching peak, summed over the launches. It is a lower
bound (no launch overhead, no latency, perfect overlap); the ``PredictedTime`` it returns is a float that
says so (``.predicted``, ``.how``), and ``pytest --tt-cuda`` counts such answers in its summary. A
function that launched no Triton kernel (a torch reference timed beside one) has no roofline: its answer
is the CPU's wall time of one call, marked "measured on the CPU".
"""
from __future__ import annotations

import time

ANSWERS: list = []       # every PredictedTime answered in this process, in order (the plugin counts them)


class PredictedTime(float):
    """Milliseconds, as ``do_bench`` returns them, with where they came from."""
    predicted = True

    def __new__(cls, ms: float, how: str):
        obj = super().__new__(cls, ms)
        obj.how = how
        return obj

    def __repr__(self) -> str:
        return f"{float(self)!r} ({self.how})"


def _gpu_key() -> str:
    from triton.runtime import driver
    return getattr(driver.active, "key", "H200")


def predict(launches, gpu: str) -> float:
    """Seconds: the sum of the launches' roofline times on ``gpu`` (a key of analysis/gpus.py)."""
    from ..analysis import analyze
    from ..model import Trace
    report = analyze(Trace(tuple(launches)), gpu=gpu, layouts="model", what_if=False)
    return sum(lr.summary["roofline"][gpu]["time_s"] for lr in report.launches)


def measure(fn) -> PredictedTime:
    """Run ``fn`` once, traced, and answer its predicted time on the redirect's GPU."""
    from ..record.session import current_trace, trace_all
    before = len(current_trace().launches)
    start = time.perf_counter()
    with trace_all():
        fn()
    wall = time.perf_counter() - start
    launches = current_trace().launches[before:]
    gpu = _gpu_key()
    seconds = predict(launches, gpu) if launches else 0.0
    if seconds > 0:
        answer = PredictedTime(seconds * 1e3, f"predicted: roofline lower bound of {len(launches)} launch(es) "
                                              f"on {gpu}")
    else:
        answer = PredictedTime(wall * 1e3, "measured on the CPU: the function launched no Triton kernel"
                               if not launches else "measured on the CPU: its launches moved no bytes")
    ANSWERS.append(answer)
    return answer


def _shape(answer: PredictedTime, quantiles, return_mode: str):
    if quantiles is not None:
        return [answer for _ in quantiles]
    if return_mode == "all":
        return [answer]
    return answer


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **kwargs):
    """``triton.testing.do_bench``'s signature; one traced run instead of timed repetitions."""
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None
    return _shape(measure(fn), quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean", **kwargs):
    """``triton.testing.do_bench_cudagraph``: no graph to capture on the CPU; the same prediction."""
    return do_bench(fn, grad_to_none=grad_to_none, quantiles=quantiles, return_mode=return_mode)
