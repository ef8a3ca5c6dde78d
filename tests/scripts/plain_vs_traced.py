"""Which library-style kernels (tests/kernels/library.py) Triton's plain interpreter gets wrong, and whether
the traced run gets them right.

    python tests/scripts/plain_vs_traced.py

runs every kernel twice on CPU tensors, each time in a fresh process: "plain" with TRITON_INTERPRET=1 and
no triton_trace, "traced" through ``triton_trace.trace`` without the variable, and compares both with the
kernel's torch reference (bit-exact for integer/fp16/bf16 kernels, the kernel's stated tolerance for
float32 ones). It prints one table row per kernel and exits 1 if a traced run fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compare(out, ref, tol) -> str:
    import torch
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        if tol is None:
            if not torch.equal(o, r):
                return f"wrong ({int((o != r).sum())} of {o.numel()} elements differ)"
        elif not torch.allclose(o, r, rtol=tol[0], atol=tol[1], equal_nan=True):
            err = (o.double() - r.double()).abs().max().item()
            return f"wrong (max abs error {err:.3g})"
    return "ok"


def child(mode: str) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import kernels as K
    import triton
    wrap = (lambda k: k)
    if mode == "traced":
        from triton_trace import trace
        wrap = trace
    for name, (make, launch, reference, inputs, tol) in K.LIBRARY.items():
        args = inputs("cpu")
        try:
            verdict = _compare(launch(*args, kernel=wrap(make())), reference(*args), tol)
        except Exception as e:  # the point is to report it
            while getattr(e, "__cause__", None) is not None and type(e).__name__ == "InterpreterError":
                e = e.__cause__
            text = " ".join(str(e).split())
            verdict = f"fails: {type(e).__name__}: {text[:90]}"
        print(json.dumps({"kernel": name, "verdict": verdict, "triton": triton.__version__}), flush=True)


def run(mode: str) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if mode == "plain":
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    rows = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["kernel"]] = row
    if proc.returncode != 0:
        rows["_crash"] = {"verdict": f"process exited with {proc.returncode}: {proc.stderr.strip()[-200:]}"}
    return rows


def main() -> int:
    plain, traced = run("plain"), run("traced")
    names = [k for k in {**plain, **traced} if not k.startswith("_")]
    version = next(iter(traced.values()), {}).get("triton", "?")
    import numpy
    print(f"Triton {version}, numpy {numpy.__version__}, Python {sys.version.split()[0]}")
    print(f"| kernel | plain interpreter (TRITON_INTERPRET=1) | traced |\n| --- | --- | --- |")
    for name in names:
        p = plain.get(name, {}).get("verdict", "did not run (the process crashed)")
        t = traced.get(name, {}).get("verdict", "did not run (the process crashed)")
        print(f"| {name} | {p} | {t} |")
    for rows, mode in ((plain, "plain"), (traced, "traced")):
        if "_crash" in rows:
            print(f"{mode}: {rows['_crash']['verdict']}")
    return 0 if all(traced.get(n, {}).get("verdict") == "ok" for n in names) else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
