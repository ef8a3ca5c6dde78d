"""The text of a reproducer script. Everything it needs is in it or in the data file beside it: the kernel
module (compiled/source.py, checked statement by statement), the grid, the launch options, each argument
(tensors rebuilt on their storages with dtype, shape, strides and offset, so aliasing between arguments is
kept; constants as Python expressions), and the check of the written storages against the recorded bytes."""
from __future__ import annotations

import pprint
import re

import triton

from ..compiled.source import constant_node
from ..errors import TraceUsageError

_TEMPLATE = '''#!/usr/bin/env python3
"""Reproducer of launch {index} of kernel '{kernel}', written by triton_trace from a trace made with Triton {triton}.

    python launch.py            trace it on the CPU with triton_trace, check its outputs against the trace and
                                say which of the trace's findings it reproduces
    python launch.py --plain    run it under Triton's plain interpreter (TRITON_INTERPRET=1) and check them
    python launch.py --gpu      run it compiled on a CUDA GPU and compare with the trace (triton_trace.compare)
    python launch.py --force    with --plain or --gpu: run even a launch that accesses memory out of bounds
    python launch.py --save T   also save the new trace to T (view it with: triton-trace view T)
    python launch.py --trust    needed (with any of the above) when written from a trace file you did not record

Inputs: {note}.
Exit status: 0 when the outputs match (bit for bit on the CPU; within the ops' tolerance on the GPU), 1 when
they differ, 2 when the check cannot run here (or would access memory out of bounds).
"""
import os
import sys

# The trace file this script was written from, when its user did not record it (None: recorded or signed by
# the user who wrote the script). Its kernel code is then someone else's: read it before running it.
FOREIGN = {foreign}
if FOREIGN is not None and "--trust" not in sys.argv[1:]:
    print(f"launch.py: written from {{FOREIGN}}, a trace file you did not record: the kernel code below comes "
          f"from that file and runs when this script does. Read this script, then run it with --trust.",
          file=sys.stderr)
    sys.exit(2)

if "--plain" in sys.argv[1:]:
    os.environ["TRITON_INTERPRET"] = "1"       # read when @triton.jit runs below: the kernel is interpreted

import numpy as np
import torch

# ------------------------------------------------------------------------------------------------------
# the kernel module, as traced{missing}
# ------------------------------------------------------------------------------------------------------
{module}
# ------------------------------------------------------------------------------------------------------
# the launch
# ------------------------------------------------------------------------------------------------------
KERNEL = {kernel}
GRID = {grid}
LAUNCH_OPTIONS = {options}
OUTPUTS = {outputs}                       # arguments declared undefined at launch
EXACT = {exact}                           # the data file holds the launch's own inputs
STORAGES = {storages}                     # storages in the data file (input_<k>)
WRITTEN = {finals}                        # storages whose bytes after the launch were recorded (final_<k>)
# tensor arguments: name -> storage, dtype, shape, strides and offset in elements
TENSORS = {tensors}
DESCRIPTORS = {descriptors}                     # host TensorDescriptors: name -> shape, strides, block shape
VALUES = {{
{values}}}
ORDER = {order}
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_data.npz")
# what the analysis found in the traced launch: kind, tensor, line in the kernel's own file, count
FINDINGS = {findings}
# (first, last, line): this script's lines of each function above, and the line of its def in its own file
SPANS = {spans}
# out of bounds, the plain interpreter and a GPU read and write outside the tensors: the outputs may still
# match, and the process crash afterwards (or a GPU fault), so --plain and --gpu want --force
UNSAFE = [f for f in FINDINGS if f["kind"] == "out_of_bounds"]


def storages(device="cpu"):
    with np.load(DATA, allow_pickle=False) as data:
        return [torch.from_numpy(data[f"input_{{k}}"].copy()).to(device) for k in range(STORAGES)]


def view(storage, name):
    t = TENSORS[name]
    return torch.empty(0, dtype=getattr(torch, t["dtype"]), device=storage.device).set_(
        storage.untyped_storage(), t["offset"], t["shape"], t["strides"])


def arguments(stores):
    args = {{}}
    for name in ORDER:
        if name in DESCRIPTORS:
            from triton.tools.tensor_descriptor import TensorDescriptor
            d = DESCRIPTORS[name]
            args[name] = TensorDescriptor(view(stores[TENSORS[name]["storage"]], name), d["shape"], d["strides"],
                                          d["block_shape"])
        elif name in TENSORS:
            args[name] = view(stores[TENSORS[name]["storage"]], name)
        else:
            args[name] = VALUES[name]
    return args


_INT = {{1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}}


def check(stores):
    """Compare the written storages with the recorded bytes; print what differs. True when all match."""
    if not EXACT:
        print("inputs are statistical stand-ins: the outputs ran but cannot be compared with the trace")
        return True
    ok = True
    with np.load(DATA, allow_pickle=False) as data:
        for k in WRITTEN:
            got, want = stores[k].cpu(), torch.from_numpy(data[f"final_{{k}}"].copy())
            if torch.equal(got, want):
                continue
            ok = False
            named, shown = [n for n, t in TENSORS.items() if t["storage"] == k], False
            for name in named:
                g, w = view(got, name), view(want, name)
                bits = _INT[g.element_size()]
                bad = (g.contiguous().view(bits) != w.contiguous().view(bits))
                if bad.any():
                    shown = True
                    first = [int(i) for i in bad.nonzero()[0]]
                    print(f"output '{{name}}': {{int(bad.sum())}} of {{bad.numel()}} elements differ from the trace; "
                          f"first at {{first}}: {{g[tuple(first)].item()!r}} here, {{w[tuple(first)].item()!r}} traced")
            if not shown:
                print(f"storage {{k}}: {{int((got != want).sum())}} bytes outside the arguments' views differ")
    if ok:
        print(f"outputs match the trace bit for bit ({{len(WRITTEN)}} written storage(s) compared)")
    return ok


def source_line(line):
    """The line in the kernel's own file of a line of this script (as the trace's findings name it)."""
    for first, last, at in SPANS:
        if first <= line <= last:
            return at + max(line - first - 1, 0)
    return line


def reproduced(trace):
    """Say which of the traced launch's findings this run has too; the analysis runs on the new trace."""
    import triton_trace
    found = {{}}
    for f in triton_trace.analyze(trace, layouts="model", what_if=False).findings:
        found.setdefault((f.kind, f.tensor, source_line(f.line)), 0)
        found[(f.kind, f.tensor, source_line(f.line))] += f.count
    want = {{(f["kind"], f["tensor"], f["line"]): f["count"] for f in FINDINGS}}
    say = lambda key: f"{{key[0]}} of '{{key[1]}}' at line {{key[2]}}"
    if not want and not found:
        print("findings: none, as in the trace")
    for key in sorted(want, key=str):
        print(f"{{'reproduces' if key in found else 'does not reproduce'}} the trace's {{say(key)}}"
              + ("" if key in found or EXACT else " (the inputs are stand-ins: it may depend on their values)"))
    for key in sorted(set(found) - set(want), key=str):
        print(f"new here: {{say(key)}}")


def main(argv):
    stores = None
    if UNSAFE and ("--plain" in argv or "--gpu" in argv) and "--force" not in argv:
        where = "; ".join(f"{{f['kind']}} of '{{f['tensor']}}' at line {{f['line']}}" for f in UNSAFE[:3])
        print(f"launch.py: the traced launch accesses memory out of bounds ({{where}}): run as it is, "
              f"{{'a GPU' if '--gpu' in argv else 'the plain interpreter'}} would read or write outside the "
              f"tensors and may report matching outputs, then crash. Run it without --plain/--gpu to trace it, "
              f"or add --force to run it anyway.", file=sys.stderr)
        return 2
    if "--gpu" in argv:
        import triton_trace
        try:
            result = triton_trace.compare(KERNEL, GRID, outputs=None, **arguments(storages("cpu")),
                                          **LAUNCH_OPTIONS)
        except triton_trace.TraceUsageError as e:
            print(e)
            return 2
        print(result.summary())
        return 0 if result.ok else 1
    stores = storages("cpu")
    args = arguments(stores)
    if "--plain" in argv:
        KERNEL[GRID](**args, **LAUNCH_OPTIONS)
    else:
        import triton_trace
        traced = triton_trace.trace(KERNEL, outputs=OUTPUTS)
        try:
            traced[GRID](**args, **LAUNCH_OPTIONS)
        finally:
            if "--save" in argv:
                path = argv[argv.index("--save") + 1]
                triton_trace.current_trace().save(path)
                print(f"trace saved to {{path}}")
        print(triton_trace.current_trace().summary())
        reproduced(triton_trace.current_trace())
    return 0 if check(stores) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


_SPANS = "<<spans>>"


def _fmt(obj) -> str:
    return pprint.pformat(obj, width=110, sort_dicts=False)


def _docstring_safe(text) -> str:
    """Text from the trace, safe inside the script's docstring and on one comment line."""
    return " ".join(str(text).replace("\\", "/").replace('"""', "'''").split())


def render(launch, module, tensors: dict, params: dict, exact: bool, note: str, index: int, storages: int,
           finals: list, foreign=None, findings: list = ()) -> str:
    options = launch.module.options()
    if not all(str(k).isidentifier() and isinstance(v, (bool, int, str)) and str(v).isprintable()
               for k, v in options.items()):
        raise TraceUsageError(f"launch of '{launch.kernel_name}': its launch options {options!r:.80} are not plain")
    descriptors = {n: {"shape": list(p.shape), "strides": list(p.strides), "block_shape": list(p.block_shape)}
                   for n, p in params.items() if p.kind == "descriptor"}
    constants = {name: p.expr for name, p in params.items() if p.kind == "value"}
    for name, expr in constants.items():
        constant_node(expr, name)          # refuses anything but a constant: the text goes into the script
    values = "".join(f"    {name!r}: {expr},\n" for name, expr in constants.items())
    missing = "".join(f"\n# NOTE: '{_docstring_safe(m.name)}' was not carried over: "
                      f"{_docstring_safe(m.why)}" for m in module.missing)
    version = launch.module.triton or triton.__version__
    version = version if re.fullmatch(r"[\w.+-]{1,40}", version) else "unknown"
    text = _TEMPLATE.format(
        findings=_fmt([{"kind": str(f["kind"]), "tensor": str(f["tensor"]), "line": int(f["line"]),
                        "count": int(f["count"])} for f in findings]), spans=_SPANS,
        index=index, kernel=module.kernel, triton=version, note=_docstring_safe(note), module=module.text,
        grid=tuple(int(g) for g in launch.grid), options=_fmt(options),
        outputs=tuple(launch.outputs), exact=exact, storages=storages, finals=_fmt(finals),
        tensors=_fmt(tensors), descriptors=_fmt(descriptors), values=values, order=_fmt(list(params)),
        missing=missing, foreign=repr(str(foreign)) if foreign is not None else "None")
    # the module's place in the script, known once the text before it is: the SPANS line comes after it
    at = text.index(module.text)
    offset, end = text.count("\n", 0, at), at + len(module.text)
    spans = [(s.first + offset, s.last + offset, s.line) for s in module.spans]
    return text[:end] + text[end:].replace(_SPANS, repr(spans), 1)
