"""Run the drop-in cases of tests/kernels/dropin.py under Triton's plain interpreter and save what they
produced (outputs, printed text, errors) to the path given, for tests/record/test_dropin.py to compare with."""
import contextlib
import io
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from kernels import dropin  # noqa: E402


def plain(kernel, **_):
    return kernel


def main(path):
    results = {}
    for name, run in dropin.CASES.items():
        if name in dropin.PLAIN_UNSAFE:
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                tensors = run(plain)
            results[name] = {"tensors": tensors, "stdout": out.getvalue(), "error": None}
        except Exception as e:
            results[name] = {"tensors": None, "stdout": out.getvalue(), "error": repr(e)}
    errors = {}
    for name in ("bad_arange", "bad_axis"):
        try:
            getattr(dropin, name)[(1,)](torch.zeros(4))
            errors[name] = None
        except Exception as e:
            errors[name] = {"type": type(e).__name__, "cause": type(e.__cause__).__name__, "text": str(e.__cause__)}
    torch.save({"cases": results, "errors": errors}, path)


if __name__ == "__main__":
    main(sys.argv[1])
