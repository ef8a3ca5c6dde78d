"""Triton's own language tests two ways, and every test whose outcome differs between them explained.

    python benchmarks/suites/run_triton_tests.py /work/shared/triton-tests/release-3.6/python/test/unit \\
        --python .venv-triton36/bin/python

1. plain: ``TRITON_INTERPRET=1 pytest --device=cpu``, Triton's CPU interpreter as Triton's CI runs it;
2. traced: ``triton-trace pytest --device=cuda``, the same tests unchanged, written for a GPU, run on the
   CPU through the CUDA redirect, every launch traced and checked (a test with error findings fails);
   and once more with ``--tt-findings=warn`` (findings listed, not failed), which separates what the
   findings fail from what the redirect changes.

All take ``-m interpreter`` (the tests Triton marks as supported by its interpreter) and the same ``-k``.
pytest's junit XML gives each test's outcome; ``RESULTS_triton_tests.txt`` beside this script gets the
commands, versions, wall times, the counts each way, and per test whose outcome differs from the plain
run's the explanation from ``EXPLAINED``, matched on the node id and the whole text of both reports.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from run_library_suite import ROOT, outcomes, tree_commit, versions

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ["language/test_core.py"]
K = "test_bin_op and int32 or test_reduce and float32 or test_masked_load"     # about 10 minutes here

# (pattern on "node id | plain message | traced report", explanation); the first that matches explains it
EXPLAINED = [
    (r"bfloat16 is not supported in the interpreter", (
        "runs only traced: under TRITON_INTERPRET=1 the test skips bfloat16 itself (Triton's interpreter has "
        "no bfloat16); with --device=cuda it runs, and the tracer's bfloat16 arithmetic passes its comparison "
        "with numpy")),
    (r"conversion to fp16 from finite operands", (
        "true finding, by design of the test: it mixes random int32/uint32 values over their whole range "
        "with float16, so the values beyond float16's range (65504) convert to inf before the op; numpy's "
        "reference converts the same way, so the test passes plain; the nonfinite check reports the inf "
        "reaching memory (kind overflow, an error: the test fails under --tt-findings=fail)")),
    (r"does not fit: .* became", (
        "true finding, by design of the test: random int32 values over their whole range wrap in +, - and * "
        "(two's complement, as on the GPU and in numpy's reference); the overflow check reports the wrapped "
        "value reaching memory (an error finding: the test fails under --tt-findings=fail)")),
    (r"integer division with no defined result", (
        "true finding: the test's random int8 data hold -128 and the constexpr divisor is -1, and -128 % -1 "
        "in int8 (a constexpr keeps the tensor's type) has no defined result (LLVM's srem overflows; a GPU may "
        "give garbage or trap); the interpreter and numpy give 0, so the test passes plain")),
]


def explain(text: str) -> str:
    for pattern, why in EXPLAINED:
        if re.search(pattern, text):
            return why
    return "UNEXPLAINED"


def reports(xml_path: str) -> dict:
    """{node id: the whole text of its failure, error or skip} from pytest's junit XML (the message
    attribute is cut to a line; a triton_trace failure's report is in the element's text)."""
    found = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        node = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                found[node] = f"{el.get('message') or ''} {el.text or ''}"
    return found


def counts(rows: list) -> str:
    c = collections.Counter(r[1] for r in rows)
    return ", ".join(f"{k} {c.get(k, 0)}" for k in ("passed", "failed", "error", "skipped"))


def differences(plain: dict, traced: dict, texts: dict) -> list:
    """[(node id, plain outcome, traced outcome, explanation, message)] of the tests whose outcome differs."""
    out = []
    for node in sorted(set(plain) | set(traced)):
        p, t = plain.get(node, (node, "absent", "")), traced.get(node, (node, "absent", ""))
        if p[1] != t[1]:
            text = f"{node} | {texts['plain'].get(node, '')} | {texts['traced'].get(node, '')}"
            out.append((node, p[1], t[1], explain(text), t[2] or p[2]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unit", help="Triton's python/test/unit folder (its conftest adds --device)")
    ap.add_argument("--python", default=sys.executable, help="a venv's python with torch, Triton, triton_trace")
    ap.add_argument("-k", default=K, help=f"pytest -k expression (default: {K!r})")
    ap.add_argument("--gpu", default="H200")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS_triton_tests.txt"))
    args = ap.parse_args(argv)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    env.pop("TRITON_INTERPRET", None)
    common = ["-p", "no:cacheprovider", "-q", "-rfEs", "-m", "interpreter", *FILES, "-k", args.k]
    tool = os.path.join(os.path.dirname(args.python), "triton-trace")
    ways = {   # name -> (command, environment); the last two differ only in what findings do to a test
        "plain": ([args.python, "-m", "pytest", "--device=cpu", *common], {**env, "TRITON_INTERPRET": "1"}),
        "traced": ([tool, "pytest", "--gpu", args.gpu, "--device=cuda", *common], env),
        "traced, findings warn": ([tool, "pytest", "--gpu", args.gpu, "--device=cuda", "--tt-findings=warn",
                                   *common], env),
    }
    load = os.getloadavg()[0]
    rows, texts, walls, shown = {}, {}, {}, {}
    for i, (way, (cmd, way_env)) in enumerate(ways.items()):
        xml = os.path.join(HERE, f".junit_triton_{i}.xml")
        start = time.time()
        done = subprocess.run(cmd + [f"--junitxml={xml}"], cwd=args.unit, capture_output=True, text=True,
                              env=way_env)
        walls[way] = time.time() - start
        if not os.path.exists(xml):
            print(done.stdout[-4000:], done.stderr[-4000:], sep="\n")
            print(f"the {way} run wrote no junit XML (exit {done.returncode})", file=sys.stderr)
            return 2
        rows[way], texts[way] = outcomes(xml), reports(xml)
        os.remove(xml)
        prefix = "TRITON_INTERPRET=1 " if way == "plain" else ""
        shown[way] = prefix + " ".join(c.replace(os.path.dirname(args.python) + os.sep, "") for c in cmd)
        if way == "traced":
            summary = done.stdout[done.stdout.rfind("= triton_trace ="):] if "= triton_trace =" in done.stdout else ""

    lines = ["# Triton's language tests: the plain interpreter and triton-trace pytest on the unchanged CUDA tests",
             f"tests: {args.unit} (Triton's release/3.6.x at 7c56a5e4, unchanged: see its README)",
             *(f"{way} (in the tests folder): {shown[way]}" for way in ways),
             f"versions: {versions(args.python)}; triton_trace {tree_commit()} (PYTHONPATH={ROOT})",
             "wall time: " + ", ".join(f"{way} {walls[way]:.0f} s" for way in ways) +
             f" on this machine ({os.cpu_count()} cores; load average {load:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end: other jobs shared them)",
             *(f"{way}: {len(rows[way])} tests; {counts(rows[way])}" for way in ways), ""]
    by_node = {way: {r[0]: r for r in rows[way]} for way in ways}
    for way in list(ways)[1:]:
        differ = differences(by_node["plain"], by_node[way], {"plain": texts["plain"], "traced": texts[way]})
        lines.append(f"## plain vs {way}: {len(differ)} outcome(s) differ")
        why_counts = collections.Counter((d[1], d[2], d[3]) for d in differ)
        lines += [f"- {n} test(s) {p} plain, {t} {way}: {why}" for (p, t, why), n in why_counts.most_common()]
        lines.append("")
    lines.append("## triton_trace summary (traced run)")
    lines += [ln for ln in summary.splitlines()[1:] if ln.strip() and not ln.startswith(("=", "FAILED"))][:40]
    lines += ["", "## each test that differs, plain vs traced (node id | plain | traced | message)"]
    differ = differences(by_node["plain"], by_node["traced"], {"plain": texts["plain"], "traced": texts["traced"]})
    lines += [f"{d[0]} | {d[1]} | {d[2]} | {d[4][:200]}" for d in differ]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:14]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
