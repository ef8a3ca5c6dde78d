"""Launch by launch: every Triton launch of a slice of FlagGems' and fla's own test suites, unchanged, on the
GPU and traced on the CPU, compared bit for bit (issue 42, item 1: "through the suite mode").

    bash benchmarks/fidelity/fetch_libraries.sh .lib .whl-lib          # here: the sources, at their commits
    PYTHONPATH=. python3 benchmarks/fidelity/library_launches.py --out OUT [--lib-root .lib] [--workers 16]
        [--budget 150] [--libraries flaggems fla] [--reference interpreter]
    PYTHONPATH=. python3 benchmarks/fidelity/library_launches.py --out OUT --custom DIR FILE... (a suite of one's own)

Each library's test files run in its exported tree (``--lib-root``/<library>, its sources importable from
there, nothing installed) with ``launch_plugin`` as for Triton's language tests (launches.py): each launch
runs as the test made it and is traced on CPU copies of its inputs, every output compared bit for bit.
``--lf-relaunch`` is on, so FlagGems' LibEntry, which launches a kept CompiledKernel itself after a key's
first call, is compared at every launch, not only the first. ``--reference interpreter`` runs the same
pipeline on a machine without a GPU: the suites, written for CUDA, run under triton_trace's CUDA redirect
answering as an H100, each launch in the interpreter untraced as the reference. ``--budget`` seconds from
the start no new test starts (shuffled tests; the libraries run one after the other, each until its share
of the budget has passed, time one leaves over going to the next). Writes OUT/<library>/ (table.md,
summary.json, launches.jsonl.gz, pytest.log, as launches.py) and OUT/table.md: per library the table by op
class (the test function) and dtype, and one by kernel.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import gzip
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import launch_table  # noqa: E402
import launches  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Library:
    name: str
    paths: tuple            # folders put on PYTHONPATH, relative to the library's tree
    files: tuple            # test files (or node ids), relative to the tree
    args: tuple = ()        # more pytest arguments: the library's own options
    k: str = ""             # the library's deselection (-k), joined with the command line's -k
    share: float = 0.5      # of the budget


# The slice: test files that run quickly, as the CPU runs chose them (benchmarks/suites/run_library_suite.py),
# plus FlagGems' division, exp and cumsum (div.full.f32, ex2.approx and the scan tree on the GPU).
LIBRARIES = {
    "flaggems": Library("flaggems", ("src",), (
        "tests/test_abs.py", "tests/test_add.py", "tests/test_gelu.py", "tests/test_div.py", "tests/test_exp.py",
        "tests/test_sum.py", "tests/test_softmax.py", "tests/test_layer_norm.py", "tests/test_rms_norm.py",
        "tests/test_mean.py", "tests/test_cumsum.py", "tests/test_mm.py", "tests/test_bmm.py",
        "tests/test_scaled_dot_product_attention.py"),
        # FlagGems' own small parametrisation; test_mm's vllm_tma tests (4096-wide shapes) and
        # test_mean_dim_large_innerdim (4-8 GB tensors, copied to the CPU for the trace) left out
        ("--quick",), "not vllm_tma and not large_innerdim", 0.5),
    # fla's fast tests (benchmarks/suites/RESULTS_fla.txt: test_chunk's T >= 500 parameters take minutes in
    # the interpreter: their fused_recurrent reference walks T step by step). simple_gla is left out: on
    # Hopper with Triton < 3.7.1 fla refuses its gated backward (fla #640) before any kernel runs.
    "fla": Library("fla", (".",), (
        "tests/modules/test_activation.py::test_sigmoid", "tests/modules/test_l2norm.py",
        "tests/modules/test_layernorm.py::test_rmsnorm", "tests/ops/utils/test_cumsum.py",
        "tests/ops/test_solve_tril.py",
        *(f"tests/ops/test_gla.py::test_chunk[{p}]" for p in (
            "B1-T63-H1-D64-gate_logit_normalizer1-torch.float16",
            "B1-T64-H2-D320-gate_logit_normalizer1-torch.float16",
            "B1-T128-H4-D256-gate_logit_normalizer1-torch.float16")),
        "tests/ops/test_retention.py::test_chunk[B1-T63-H1-K64-expand_ratio1-torch.float16]",
        "tests/ops/test_delta.py::test_chunk[B1-T63-H1-D64-scale1-False]",
        "tests/ops/test_delta.py::test_chunk[B2-T100-H4-D60-scale0.1-False]"),
        ("-o", "log_cli=false"), "", 0.5),
}
REDIRECT_GPU = "H100"       # what the CUDA redirect answers as with --reference interpreter


def library_command(args, lib: Library, root: Path, deadline: float) -> list:
    cmd = launches.plugin_command(argparse.Namespace(**{**vars(args), "k": None}), "{LOG}", deadline)
    cmd += ["--lf-relaunch", f"--confcutdir={root}"]     # the library's own conftest files, none above it
    if args.reference == "interpreter":
        cmd += [f"--lf-cuda-on-cpu={REDIRECT_GPU}"]
    k = " and ".join(f"({x})" for x in (lib.k, args.k) if x)
    return cmd + (["-k", k] if k else []) + list(lib.args) + list(lib.files)


def by_kernel(out: Path) -> list:
    """Rows (kernel, dtypes, counts by status) from a library's launches.jsonl.gz."""
    rows = collections.defaultdict(collections.Counter)
    with gzip.open(out / "launches.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            rows[(r["kernel"], launch_table.dtypes_of(r))][r["status"]] += 1
    return [{"kernel": k, "dtypes": d, **{s: c.get(s, 0) for s in launch_table.STATUSES}}
            for (k, d), c in sorted(rows.items())]


def kernel_table(rows: list) -> str:
    lines = ["| kernel | dtypes | launches | exact | nan bits | 1 ulp | beyond | trace error |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        n = sum(r[s] for s in launch_table.STATUSES)
        lines.append(f"| {r['kernel']} | {r['dtypes']} | {n} | "
                     + " | ".join(str(r[s]) for s in launch_table.STATUSES) + " |")
    return "\n".join(lines)


def run_library(args, lib: Library, root: Path, deadline: float, command: str, limit: float = 0.0) -> tuple:
    out = Path(args.out) / lib.name
    env = launches.environment(args, [root / p for p in lib.paths], interpret=False)
    env.setdefault("GEMS_VENDOR", "nvidia")     # FlagGems: no probing of every vendor's tools for its device
    cmd = library_command(args, lib, root, deadline)
    summary, text, output = launches.run_suite(cmd, root, env, out, f"{lib.name}: {args.reference} vs trace",
                                               command, limit)
    rows = by_kernel(out)
    summary["by_kernel"] = rows
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    commit = (root / "COMMIT").read_text().strip() if (root / "COMMIT").exists() else "unknown"
    text = text.replace("\n\n", f"\n\n{lib.name} at commit {commit}: `{' '.join(lib.files)}` "
                                f"{' '.join(lib.args)}" + (f" -k '{lib.k}'" if lib.k else "") + "\n\n", 1)
    text += f"\n## By kernel ({len(rows)})\n\n" + kernel_table(rows) + "\n"
    (out / "table.md").write_text(text)
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    return summary, text, tail


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    launches.add_common_options(ap)
    ap.add_argument("--lib-root", default=".lib", help="the folder fetch_libraries.sh filled")
    ap.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=list(LIBRARIES))
    ap.add_argument("--custom", nargs="+", default=None, metavar="DIR FILE",
                    help="instead: the test files FILE... of a library in DIR (its root on PYTHONPATH)")
    args = ap.parse_args(argv)
    if launches.gpu_missing(args):
        return 2
    if args.custom:
        root = Path(args.custom[0]).resolve()
        plan = [(Library(root.name, (".",), tuple(args.custom[1:]), share=1.0), root)]
    else:
        plan = [(LIBRARIES[n], Path(args.lib_root).resolve() / n) for n in args.libraries]
        missing = [str(r) for _, r in plan if not r.is_dir()]
        if missing:
            print(f"library_launches.py: no {', '.join(missing)}: run benchmarks/fidelity/fetch_libraries.sh first")
            return 2
    start = time.time()
    command = launches.command_line(__file__, argv)
    shares = [lib.share for lib, _ in plan]
    texts, totals = [], collections.Counter()
    for i, (lib, root) in enumerate(plan):
        deadline = start + args.budget * sum(shares[:i + 1]) / sum(shares) if args.budget else 0.0
        # the hard limit is shared alike; a library stopped at its limit keeps the launches it compared
        limit = max(start + args.limit * sum(shares[:i + 1]) / sum(shares) - time.time(), 10.0) if args.limit else 0.0
        summary, text, tail = run_library(args, lib, root, deadline, command, limit)
        texts.append(text)
        totals.update(summary["by_status"])
        totals["launches"] += summary["launches"]
        print(f"{lib.name}: {summary['launches']} launches, {summary['by_status']}; pytest: {tail}", flush=True)
    head = (f"# Library launches: {args.reference} vs trace\n\n`{command}`: {totals['launches']} launches, "
            + ", ".join(f"{s}: {totals[s]}" for s in launch_table.STATUSES) + f"; {time.time() - start:.0f} s\n\n")
    text = head + "\n".join(t.replace("\n# ", "\n## ").replace("# ", "## ", 1) for t in texts)
    (Path(args.out) / "table.md").write_text(text)
    print(text)
    return 0 if totals["launches"] else 1


if __name__ == "__main__":
    sys.exit(main())
