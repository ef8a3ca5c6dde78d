"""Tracing overhead: the same launches traced by triton_trace and run by Triton's plain interpreter.

    python benchmarks/speed/bench_trace.py [--repeat 3]

Each side runs in its own child process on the CPU, one after the other: the plain interpreter with
``TRITON_INTERPRET=1`` (set before Triton is imported, as a user would), and the same kernels traced by
``triton_trace.trace`` without it. The ratio is what matters; absolute times depend on the machine's load.
"""
import argparse
import json
import os
import subprocess
import sys
import time

if __name__ == "__main__" and "--child" in sys.argv and sys.argv[sys.argv.index("--child") + 1] == "plain":
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))        # the test kernels
import kernels as K  # noqa: E402


def cases():
    x, y = torch.randn(1 << 20), torch.randn(1 << 20)
    s = torch.randn(512, 1000)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    return {
        "vector add, 1M elements, 1024 programs": (
            lambda k: K.add(x, y, kernel=k, block=1024), K.add_kernel),
        "softmax, 512 x 1000": (lambda k: K.softmax(s, kernel=k), K.softmax_kernel),
        "matmul 256^3, 32x32x32 tiles, GROUP_M=4": (
            lambda k: K.matmul(a, b, kernel=k, block_m=32, block_n=32, block_k=32, group_m=4), K.matmul_kernel),
    }


def timed(fn, repeat, reset=lambda: None):
    best = float("inf")
    for _ in range(repeat):
        reset()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def child(mode, repeat):
    out = {}
    for name, (launch, fn) in cases().items():
        if mode == "plain":
            out[name] = {"s": timed(lambda: launch(triton.jit(fn)), repeat)}
        else:
            import triton_trace
            kernel = triton_trace.trace(triton.jit(fn))
            out[name] = {"s": timed(lambda: launch(kernel), repeat, triton_trace.reset),
                         "lanes": sum(int(lc.mask.size) for lc in triton_trace.current_trace().launches)}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", choices=["plain", "traced"])
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.repeat)
    res = {}
    for mode in ("plain", "traced"):
        r = subprocess.run([sys.executable, __file__, "--child", mode, "--repeat", str(args.repeat)],
                           capture_output=True, text=True, check=True)
        res[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"triton {triton.__version__}, torch {torch.__version__}; best of {args.repeat}")
    print(f"{'case':44s} {'interpreter':>12s} {'traced':>10s} {'ratio':>7s} {'lanes':>10s}")
    for name in res["plain"]:
        p, t = res["plain"][name]["s"], res["traced"][name]["s"]
        print(f"{name:44s} {p:11.2f}s {t:9.2f}s {t / p:6.2f}x {res['traced'][name]['lanes']:10d}")


if __name__ == "__main__":
    main()
