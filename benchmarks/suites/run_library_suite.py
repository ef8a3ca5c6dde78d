"""Run a real library's GPU test suite, unchanged, with ``triton-trace pytest`` and write what came of it.

    python benchmarks/suites/run_library_suite.py flaggems /tmp/suites/FlagGems --python /tmp/venv-fg/bin/python
    python benchmarks/suites/run_library_suite.py fla /tmp/suites/fla --python /tmp/venv-fg/bin/python

The library is a checkout outside this repository (its commit is read with git, or given with --commit when
the checkout is an exported tree); the python is a virtual environment holding torch (CPU), Triton,
triton_trace and the library. The chosen test files and the subset of their parametrisation are below, per
library. pytest's junit XML gives the outcome of every test; the summary section of triton_trace gives the
hollow ones. ``RESULTS_<library>.txt`` beside this script gets the commit, the exact command, the versions,
the counts, and one line per failure and skip: its message, and the explanation from ``EXPLAINED`` (a
real bug in the library, a fidelity gap of triton_trace, or a GPU-only feature) where one is recorded.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))       # this repository: its triton_trace is the one run

# library -> (test files, extra pytest arguments: the subset run)
SUITES = {
    "flaggems": ([
        "tests/test_abs.py", "tests/test_add.py", "tests/test_gelu.py",              # elementwise
        "tests/test_sum.py", "tests/test_softmax.py", "tests/test_layer_norm.py",    # reductions / norms
        "tests/test_rms_norm.py", "tests/test_mean.py",
        "tests/test_mm.py", "tests/test_bmm.py",                                     # matmul
        "tests/test_scaled_dot_product_attention.py",                                # attention
    ], ["--quick", "-k", "not vllm_tma and not large_innerdim"]),
    # deselected: test_mm's two vllm_tma tests (fixed shapes of 4096s: over 300 s each in the interpreter),
    # test_mean_dim_large_innerdim (allocates 4-8 GB tensors: the 23 GB machine runs out of memory)
    "fla": ([
        "tests/modules/test_activation.py::test_sigmoid",                            # elementwise
        "tests/modules/test_l2norm.py", "tests/modules/test_layernorm.py::test_rmsnorm",   # norms
        "tests/ops/utils/test_cumsum.py",                                            # chunked reductions
        "tests/ops/test_solve_tril.py",                                              # blocked triangular matmul
        # the chunked recurrent ops: each test_chunk's parameters of T <= 500, and two of T ~ 1000 (below)
        *(f"tests/ops/test_gla.py::test_chunk[{p}]" for p in (
            "B1-T63-H1-D64-gate_logit_normalizer1-torch.float16", "B1-T64-H2-D320-gate_logit_normalizer1-torch.float16",
            "B1-T128-H4-D256-gate_logit_normalizer1-torch.float16",
            "B1-T128-H4-D512-gate_logit_normalizer1-torch.bfloat16")),
        *(f"tests/ops/test_simple_gla.py::test_chunk[{p}]" for p in (
            "B1-T63-H1-D64-scale1-gate_logit_normalizer1-torch.float16",
            "B2-T500-H3-D60-scale1-gate_logit_normalizer1-torch.float16")),
        "tests/ops/test_gla.py::test_chunk[B2-T1024-H8-D128-gate_logit_normalizer0.1-torch.float16]",  # its inf
        *(f"tests/ops/test_retention.py::test_chunk[{p}]" for p in (
            "B1-T63-H1-K64-expand_ratio1-torch.float16", "B2-T500-H3-K60-expand_ratio1-torch.float16",
            "B2-T1000-H3-K100-expand_ratio1-torch.float16")),
        *(f"tests/ops/test_delta.py::test_chunk[{p}]" for p in (
            "B1-T63-H1-D64-scale1-False", "B2-T100-H4-D60-scale0.1-False")),
    ], ["-o", "log_cli=false"]),
    # 15 of test_chunk's parameters of T >= 1000 are left out: each costs 50-390 s here (their fused_recurrent
    # reference kernels loop over T one step at a time, some 30 interpreted ops a step), the four files' 27
    # together 30-45 minutes on this shared 2-core machine
}

# The GPU each library's run answers as (--gpu overrides it).
GPUS = {"fla": "A100"}

# Explanations of failures and skips, by a regular expression on the test's node id; filled from the runs.
EXPLAINED = {
    "flaggems": {
        r"test_softmax\.py::test_softmax_backward(_out)?\[True-": (
            "test input: the test fills the upstream gradient with -inf on purpose (neg_inf=True); the kernel "
            "propagates it (nonfinite_input is a warning-level finding that fails the test under the plugin's "
            "default --tt-findings=fail)"),
    },
    "fla": {
        r"test_layernorm\.py::test_rmsnorm": (
            "real (benign) defect in fla: layer_norm_bwd_kernel (fla/modules/layernorm.py:444) stores dx for a "
            "whole BT-row tile although a program owns only BS < BT rows; m_x masks rows by Tg, not by the "
            "program's range (the dw/db sums were capped with min(i_sg*BS+BS, Tg), the dx/dres_in stores "
            "were not), so neighbouring programs write the same dx rows: a write-write race, with identical "
            "values, and BT/BS times the work"),
        r"test_simple_gla\.py::test_chunk\[": (
            "environment, as on a GPU (with --gpu H200 or H100; the default A100 runs it): fla refuses Triton "
            ">= 3.4, < 3.7.1 on Hopper for chunk_bwd_dqkwg (its #640: wrong results from the compiler), and fla at "
            "this commit does not import under Triton 3.9 (see the header), so the same RuntimeError comes on a "
            "real H200 with Triton 3.6"),
        r"test_gla\.py::test_chunk\[B2-T1024-H8-D128-gate_logit_normalizer0\.1-": (
            "real (latent) defect in fla: chunk_gla_fwd_A_kernel_intra_sub_intra (fla/ops/gla/chunk.py:188-189) "
            "computes exp2(g_i - g_j) for every row i, also i < j (future keys), where g_i - g_j > 0: with "
            "gate_logit_normalizer=0.1 it reaches 128.05 and exp2 gives inf, stored in the upper triangle of A; "
            "every consumer masks A with tl.where(causal) (chunk.py:431, 635, 700), so the output is right, but "
            "A holds inf (a multiply-mask instead of where would turn it into NaN)"),
    },
}


# Why a test passed with no Triton launch (a hollow pass), by a regular expression on its node id.
HOLLOW = {
    "flaggems": {
        r"test_add\.py::test_add_scalar_scalar": (
            "the op is called on two Python scalars: torch.add(1.0, 2.0) makes no tensor on any device, so no "
            "FlagGems kernel runs on a GPU either"),
        r"test_bmm\.py::test_bmm_non_contiguous\[dtype0-1-1-32\]": (
            "the test returns before calling bmm: with N == 1 it cannot make mat2 non-contiguous and says "
            "'Skipping non-contiguous test for small N or K' (test_bmm.py:85-89); hollow on a GPU too"),
    },
}


# Said in the results file under the header: how the run was set up, and what it needed.
NOTES = {
    "flaggems": [
        "Triton 3.6.0, the release FlagGems pins for NVIDIA (src/flag_gems/backends.yaml): under 3.9 its "
        "pointwise code generator emits tl.make_block_ptr, which Triton 3.9 removed.",
        "venv: python3 -m venv; pip install torch==2.13.0 (CPU), then triton==3.6.0 numpy PyYAML sqlalchemy "
        "packaging pytest-timeout -c (torch==2.13.0), -e triton_trace, and SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 "
        "pip install --no-deps -e CHECKOUT (an exported tree has no git metadata for setuptools-scm).",
        "--quick is FlagGems' own small parametrisation; deselected: test_mm's two vllm_tma tests (fixed 4096 "
        "shapes, over 300 s each in the interpreter) and test_mean_dim_large_innerdim (4-8 GB tensors; this "
        "machine has 23 GB).",
        "Checkout: the commit exported from its git mirror (git archive), hence --commit.",
        "Attention: F.scaled_dot_product_attention on the redirect's CUDA tensors takes the backend CUDA's "
        "composite takes (triton_trace/suite/attention.py), here flash, so test_scaled_dot_product_attention_"
        "square_qk_even_mn and _nonsquare_qk run FlagGems' flash kernel (before: torch's CPU stub picked "
        "torch's CPU flash kernel and both passed hollow). FlagGems' kernel asserts that the tensors it makes "
        "from its arguments are CUDA tensors and makes constants with device=x.device: a library's CUDA kernel "
        "now sees what it makes from CUDA arguments as CUDA (suite/tensors.py). The two "
        "test_scaled_dot_product_flash_attention skips are GPU-only by the test's own choice: its reference is "
        "torch's CUDA flash kernel, called outside use_gems().",
    ],
    "fla": [
        "Triton 3.6.0: fla at this commit does not import under Triton 3.9 (fla/ops/cp/chunk_delta_h.py:321 "
        "autotunes on key 'BT', which is not a kernel argument; 3.9 rejects it at import: a real "
        "incompatibility of the library, the same on a GPU).",
        "venv: as for FlagGems, plus einops and transformers; pip install --no-deps -e CHECKOUT.",
        "fla's conftest fills torch.empty results made by fla with NaN itself; the redirect's poison is then "
        "overwritten (no uninitialized_read findings; NaN still propagates into the checks).",
        "Checkout: the commit exported from its git mirror (git archive), hence --commit; pytest-timeout 600 s.",
        "--gpu A100 (sm_80): on Hopper (H200, H100) fla refuses simple_gla's gated chunk backward under Triton "
        "< 3.7.1 (its #640) with a RuntimeError before any kernel runs, and fla needs Triton 3.6 here; as an "
        "A100 every chunked op runs its kernels, as on a real A100 with Triton 3.6.",
        "Subset: the five named files (all their parameters) and the chunked recurrent ops' test_chunk (gla, "
        "simple_gla, retention, delta rule) for their parameters of T <= 500 and two of T ~ 1000 (GLA's "
        "gate_logit_normalizer=0.1, for its inf, and retention's K=100): 12 of 27, listed in the command. The "
        "other 15 cost 50-390 s each here (one gla, simple_gla, retention and delta test of T ~ 1000 together: "
        "429 s at load 2): the tests' reference, fused_recurrent_*, walks T one step a program with some 30 "
        "interpreted ops a step. Profiled (cProfile, gla B2-T1024-H4-D60), the reference kernels are 58 of the "
        "test's 81 s, the chunked kernels 7 s; the time is per interpreted op: Triton's language and "
        "interpreter modules about a quarter, numpy a tenth, the rest the tracer's per-op hooks, the largest of "
        "them, at commit 5322971, the dataflow monitor (a recurrent state carried a tag per load of every trip "
        "so far, each op on it O(T): retention's T=1000 test took 41 s CPU without it, 60 s with it; since "
        "record/memory/feedtags.py a state holds one tag per load line, 1.06-1.12x the monitor-off time, "
        "benchmarks/speed/RESULTS_dataflow.txt). The last run of all 27 is tests/library_suites/RESULTS_fla.txt "
        "at commit b7b1193.",
    ],
}


def commit_of(checkout: str, given: str | None) -> str:
    if given:
        return given
    try:
        out = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (pass --commit)"


def versions(python: str) -> str:
    code = ("import sys, torch, triton, numpy; print(f'python {sys.version.split()[0]}, torch {torch.__version__}, "
            "triton {triton.__version__}, numpy {numpy.__version__}')")
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def outcomes(xml_path: str) -> list:
    """[(node id, outcome, message, seconds)] from pytest's junit XML."""
    rows = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        nodeid = cls.replace(".", "/") + ".py::" + name
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (el.get("message") or el.text or "").strip()
                break
        rows.append((nodeid, outcome, " ".join(message.split())[:400], float(case.get("time") or 0)))
    return rows


def file_times(rows: list) -> list:
    """One line per test file: its tests and the seconds pytest timed them (setup, call and teardown)."""
    per: dict = {}
    for nodeid, _, _, seconds in rows:
        n, total = per.get(nodeid.split("::")[0], (0, 0.0))
        per[nodeid.split("::")[0]] = (n + 1, total + seconds)
    return [f"{path}: {n} test(s), {total:.0f} s" for path, (n, total) in per.items()]


def explain(library: str, nodeid: str) -> str:
    for pattern, why in EXPLAINED.get(library, {}).items():
        if re.search(pattern, nodeid):
            return why
    return "UNEXPLAINED"


def explain_hollow(library: str, nodeid: str) -> str:
    for pattern, why in HOLLOW.get(library, {}).items():
        if re.search(pattern, nodeid):
            return why
    return "UNEXPLAINED"


def tree_commit() -> str:
    """The commit of the triton_trace tree this script belongs to (the one the run imports), and whether
    its working tree differs from it."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "triton_trace"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" plus uncommitted changes under triton_trace/" if dirty else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", choices=sorted(SUITES))
    ap.add_argument("checkout")
    ap.add_argument("--python", default=sys.executable, help="the venv's python (torch, triton, triton_trace, lib)")
    ap.add_argument("--commit", default=None, help="the library's commit, when the checkout has no .git")
    ap.add_argument("--gpu", default=None, help="the GPU it answers as (default: GPUS, else H200)")
    ap.add_argument("--timeout", default="300", help="pytest-timeout seconds per test")
    ap.add_argument("--out", default=None, help="results file (default: RESULTS_<library>.txt beside this script)")
    args = ap.parse_args(argv)

    files, extra = SUITES[args.library]
    args.gpu = args.gpu or GPUS.get(args.library, "H200")
    xml = os.path.join(HERE, f".junit_{args.library}.xml")
    tool = os.path.join(os.path.dirname(args.python), "triton-trace")
    cmd = [tool, "pytest", "--gpu", args.gpu, *files, *extra, "-q", "-rfEs",
           "-p", "no:cacheprovider", f"--timeout={args.timeout}", f"--junitxml={xml}"]
    start, load = time.time(), os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # this tree's triton_trace first on the path, whatever the venv has installed (the plugin's entry point
    # and the triton-trace script import it by name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run(cmd, cwd=args.checkout, capture_output=True, text=True, env=env)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if not os.path.exists(xml):
        print(run.stdout[-5000:], run.stderr[-5000:], sep="\n")
        print(f"pytest wrote no junit XML (exit {run.returncode}): see its output above", file=sys.stderr)
        return 2
    rows = outcomes(xml)
    summary = run.stdout[run.stdout.rfind("= triton_trace ="):] if "= triton_trace =" in run.stdout else ""
    hollow = re.findall(r"^  (\S+::\S+)$", summary.split("launched no Triton kernel")[-1], re.M) \
        if "launched no Triton kernel" in summary else []
    counts = {k: sum(1 for r in rows if r[1] == k) for k in ("passed", "failed", "error", "skipped")}

    lines = [f"# {args.library}: its GPU tests run unchanged on the CPU by triton-trace pytest",
             f"library commit: {commit_of(args.checkout, args.commit)}",
             f"command (in {args.checkout}): triton-trace {' '.join(cmd[1:])}".replace(xml, "JUNIT.xml"),
             f"versions: {versions(args.python)}; triton_trace {tree_commit()} (PYTHONPATH={ROOT})",
             f"wall time: {wall:.0f} s on this machine ({os.cpu_count()} cores; load average {load:.1f} at the "
             f"start, {os.getloadavg()[0]:.1f} at the end: other jobs shared them); CPU time {cpu:.0f} s",
             f"tests: {len(rows)}; passed {counts['passed']} (hollow: {len(hollow)}), failed {counts['failed']}, "
             f"errors {counts['error']}, skipped {counts['skipped']}", "", "## setup"]
    lines += [f"- {note}" for note in NOTES.get(args.library, [])] + [""]
    lines += ["## time per test file (pytest's timing of each test, summed)"] + file_times(rows) + [""]
    lines.append("## triton_trace summary")
    lines += [ln for ln in summary.splitlines()[1:] if ln.strip() and not ln.startswith("=")][:60]
    lines += ["", "## failures and errors (node id | explanation | message)"]
    for nodeid, outcome, message, _ in rows:
        if outcome in ("failed", "error"):
            lines.append(f"{nodeid} | {explain(args.library, nodeid)} | {message[:300]}")
    lines += ["", "## skipped (node id | reason)"]
    for nodeid, outcome, message, _ in rows:
        if outcome == "skipped":
            lines.append(f"{nodeid} | {message[:200]}")
    lines += ["", "## hollow (passed with no Triton launch: node id | why)"]
    lines += [f"{nodeid} | {explain_hollow(args.library, nodeid)}" for nodeid in hollow]
    out = args.out or os.path.join(HERE, f"RESULTS_{args.library}.txt")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.remove(xml)
    print("\n".join(lines[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
