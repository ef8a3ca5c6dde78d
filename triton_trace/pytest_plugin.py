"""``pytest --triton-trace``: run a test suite with every Triton kernel it launches traced and sanitized.

Installed with the package (a ``pytest11`` entry point) and off unless asked for, so loading it costs a
pytest run nothing: triton_trace itself is imported only when ``--triton-trace`` is given. Each test's
call runs inside ``triton_trace.trace_all()`` (CPU tensors through the interpreter, CUDA tensors on CPU
copies with the results written back); the launches are analysed when the test returns, and a test whose
launches have findings fails with the report. Under pytest-xdist every worker traces its own tests and
the controller prints one summary from the reports the workers send back.

- ``--triton-trace-kinds=out_of_bounds,race``: the finding kinds that fail a test (default: all; with
  ``--tt-cuda``, the error kinds and ``unwritten_output``).
- ``@pytest.mark.triton_trace(skip=True)``: not traced nor checked (kernels on CPU tensors still run, through
  the interpreter); ``@pytest.mark.triton_trace(expect="race")``
  (a kind or a list): the test must produce those findings, and others still fail it.
- ``--triton-trace-dir DIR``: the trace of every failing test is saved there (``NODEID.ttrace``), with its
  findings beside it (``NODEID.findings.json``: the report's ``to_dict()``), and the failure names the
  ``triton-trace view`` command that opens it. ``--tt-save=all`` saves every traced test's trace and
  findings, passing ones too (default ``failing``). Ctrl-C keeps them, and saves the launches the
  interrupted test made so far; pytest still prints the summary, which names that file.
- ``--tt-findings=fail|warn|off``: what findings do to a test (default fail; warn: a pytest warning; off:
  not analysed, launches only counted).

``--tt-cuda[=GPU]`` (implies ``--triton-trace``) runs a suite written for the GPU on the CPU, unchanged:
``triton_trace.suite.cuda_on_cpu`` is installed before conftest files are imported (a library's conftest
may read ``torch.cuda.get_device_capability()`` at import) and stays until the run ends; GPU is a key of
the analysis's table (H200 by default). ``torch.empty`` is poisoned (``--tt-poison=off`` leaves it), a test
that needs what only a GPU has (a CUDA graph, a kernel's inline assembly, a CUDA extension or a module
that loads CUDA's libraries: ``RequiresGPU``) is skipped with "requires a GPU: <what>" (a test file that
cannot be imported without one is skipped as a whole, instead of stopping the run at collection),
``triton.testing.do_bench`` answers a predicted time, and the summary counts the *hollow* tests: passed
without launching a single Triton kernel (they tested torch, not a kernel).
"""
from __future__ import annotations

import os
import re
from contextlib import ExitStack

import pytest

PROPERTY = "triton_trace"          # the per-test record the summary is built from (report.user_properties)
REDIRECT = pytest.StashKey()       # the CUDA redirect installed for the run (triton_trace.suite.Redirect)
REQUIRES_GPU = "requires a GPU: "


def pytest_addoption(parser):
    group = parser.getgroup("triton_trace", "sanitize Triton kernels with triton_trace")
    group.addoption("--triton-trace", action="store_true", default=False,
                    help="trace every Triton kernel each test launches and fail tests whose launches have findings")
    group.addoption("--triton-trace-kinds", default=None, metavar="KINDS",
                    help="comma-separated finding kinds that fail a test (default: every kind)")
    group.addoption("--triton-trace-dir", default=None, metavar="DIR",
                    help="save the trace of each failing test in DIR (.ttrace files, each with its findings "
                         "beside it in a .findings.json file)")
    group.addoption("--tt-save", choices=("failing", "all"), default="failing",
                    help="with --triton-trace-dir: save the trace and findings of failing tests (default) or of "
                         "every test that launched a traced kernel")
    group.addoption("--tt-cuda", nargs="?", const="H200", default=None, metavar="GPU",
                    help="run a suite written for the GPU on the CPU: CUDA tensors, torch.cuda and Triton's "
                         "driver answer as GPU (H200, H100, H100-PCIe, A100; default H200); implies --triton-trace")
    group.addoption("--tt-findings", choices=("fail", "warn", "off"), default="fail",
                    help="what findings do to a test: fail it (default), warn, or off (not analysed)")
    group.addoption("--tt-numerics", choices=("interpreter", "compiled"), default="interpreter",
                    help="compute as Triton's interpreter (default) or as the compiled kernel does where that is "
                         "deterministic (a*b+c as one FMA, fp32 tl.dot inputs read as TF32)")
    group.addoption("--tt-poison", choices=("on", "off"), default="on",
                    help="with --tt-cuda: fill torch.empty results with poison so reads before writes are found "
                         "(default on)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    gpu = _cuda_gpu(early_config.known_args_namespace, args)
    if gpu is not None:
        _install_redirect(early_config, gpu, early_config.known_args_namespace.tt_poison != "off")


def _cuda_gpu(ns, args):
    """The GPU ``--tt-cuda`` names, or None. ``--tt-cuda tests/`` makes argparse take the path for the GPU:
    it is given back as a path (in ``args``, which pytest parses again) and the default GPU is used."""
    value = getattr(ns, "tt_cuda", None)
    if value is None:
        return None
    from .suite import DEFAULT_GPU, resolve_gpu
    from .errors import TraceUsageError
    try:
        return resolve_gpu(value)
    except TraceUsageError as e:
        if "--tt-cuda" in args:
            i = args.index("--tt-cuda")
            if args[i + 1:i + 2] == [value]:
                args[i] = f"--tt-cuda={DEFAULT_GPU}"
                ns.tt_cuda = DEFAULT_GPU
                ns.file_or_dir = list(getattr(ns, "file_or_dir", None) or []) + [value]
                return DEFAULT_GPU
        raise pytest.UsageError(f"--tt-cuda: {e}") from None


def _install_redirect(config, gpu: str, poison: bool) -> None:
    if REDIRECT in config.stash:
        return
    from .suite import cuda_on_cpu
    stack = ExitStack()
    # launches outside a test's call (fixtures, conftests) run through the interpreter untraced;
    # each test's call traces its own (_Sanitizer)
    config.stash[REDIRECT] = stack.enter_context(cuda_on_cpu(gpu, trace=False, poison_empty=poison))
    config.add_cleanup(stack.close)


def pytest_configure(config):
    config.addinivalue_line("markers", "triton_trace(skip=False, expect=None): leave a test untraced, or name the "
                                       "finding kinds it must produce")
    gpu = config.getoption("--tt-cuda")
    if gpu is not None:          # (an xdist worker, or a run whose early parse missed it: install now)
        _install_redirect(config, _cuda_gpu(config.option, []), config.getoption("--tt-poison") != "off")
    if config.getoption("--triton-trace") or gpu is not None:
        config.pluginmanager.register(_Sanitizer(config), "triton_trace_sanitizer")


def _kinds(text):
    if not text:
        return None
    from .analysis.findings import KINDS
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    unknown = kinds - {k for k, _, _ in KINDS}
    if unknown:
        raise pytest.UsageError(f"--triton-trace-kinds: unknown kind(s) {sorted(unknown)}; choose from "
                                + "; ".join(f"{k} ({meaning})" for k, _, meaning in KINDS))
    return kinds


# a module built for CUDA that cannot load without it: its libraries, or its symbols in torch's CUDA build
_CUDA_ONLY = re.compile(r"\blib(cuda|cudart|cublas(Lt)?|cudnn\w*|nvrtc|nvJitLink|nccl|nvidia-ml|cufft|curand|cusparse"
                        r"|cusolver|nvToolsExt|c10_cuda|torch_cuda)\b|undefined symbol: \S*cuda|\bCUDA_HOME\b", re.I)


def _gpu_only(exc: BaseException, cuda: bool):
    """What only a GPU can do, named, when ``exc`` (or a cause or context of it) is a RequiresGPU, or (under
    --tt-cuda) a kernel's inline assembly the interpreter cannot run or a module that loads CUDA's
    libraries (an ImportError or OSError naming them); else None."""
    from .errors import RequiresGPU, UnsupportedOp
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RequiresGPU):
            return exc.what
        if cuda and isinstance(exc, UnsupportedOp) and exc.op.startswith("inline_asm"):
            return f"inline assembly (tl.{exc.op} in kernel '{exc.kernel}' at {exc.file}:{exc.line})"
        if cuda and isinstance(exc, (ImportError, OSError)) and _CUDA_ONLY.search(str(exc)):
            return f"a module built for CUDA ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "cause", None)     # (a conftest's)
    return None


def _where(collector, exc: BaseException) -> tuple:
    """(file, line) of the import that failed: the test file's (or the folder's conftest's) last line in
    ``exc``'s traceback, or line 1."""
    conftest = None if isinstance(exc, ImportError) else getattr(exc, "path", None)   # (ConftestImportFailure)
    path = str(conftest or getattr(collector, "path", "") or "")
    line, seen = 1, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return path, line


class _Sanitizer:
    def __init__(self, config):
        self.kinds = _kinds(config.getoption("--triton-trace-kinds"))
        self.dir = config.getoption("--triton-trace-dir")
        self.save_all = config.getoption("--tt-save") == "all"
        self.numerics = config.getoption("--tt-numerics")
        if self.save_all and not self.dir:
            raise pytest.UsageError("--tt-save=all needs --triton-trace-dir DIR: the folder the traces go to")
        self.findings = config.getoption("--tt-findings")
        self.cuda = REDIRECT in config.stash
        if self.kinds is None and self.cuda:
            # a GPU suite is written to pass on a GPU: only what breaks there fails a test (a warning such
            # as a non-finite input may be the test's own point, e.g. a -inf gradient on purpose)
            from .analysis.findings import KINDS
            self.kinds = {k for k, level, _ in KINDS if level == "error"} | {"unwritten_output"}
        self.results: list = []        # (nodeid, launches, kinds found, failed) from every worker's reports
        self.hollow: list = []         # node ids of tests that passed with no traced launch
        self.requires_gpu: dict = {}   # what -> tests (or files, at collection) skipped for it
        self.bench = 0                 # do_bench calls answered with a predicted time
        self.interrupted = None        # (test, traced launches, saved trace or None) where Ctrl-C stopped the run
        self.saved: list = []          # traces this process saved in --triton-trace-dir
        self.saved_tests = 0           # tests whose trace was saved, from every worker's reports

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        """A test file (or a folder, through its conftest) that cannot even be imported without a GPU is
        skipped, as its tests would be, instead of failing collection, which stops the whole run."""
        report = yield
        call = getattr(report, "call", None)
        excinfo = getattr(call, "excinfo", None)
        if not self.cuda or not report.failed or excinfo is None:
            return report
        what = _gpu_only(excinfo.value, True)
        if what is None:
            return report
        skipped = pytest.CollectReport(report.nodeid, "skipped", (*_where(collector, excinfo.value),
                                                                  f"{REQUIRES_GPU}{what}"), [])
        skipped.call = call
        return skipped

    def pytest_collectreport(self, report):
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
        if reason.startswith(REQUIRES_GPU):
            tests = self.requires_gpu.setdefault(reason[len(REQUIRES_GPU):], [])
            if report.nodeid not in tests:          # (under xdist, every worker collects every file)
                tests.append(report.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        try:
            return (yield)
        except Exception as e:
            self._skip_if_gpu_only(item, e)
            raise

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        marker = item.get_closest_marker("triton_trace")
        opts = dict(marker.kwargs) if marker else {}
        import triton_trace
        if opts.get("skip"):
            # not traced nor checked; kernels on CPU tensors still run (through the interpreter), as untraced
            with triton_trace.trace_all(kernels=()):
                return (yield)
        from .suite import bench
        answered = len(bench.ANSWERS)
        triton_trace.reset()
        try:
            try:
                with triton_trace.trace_all(numerics=self.numerics):
                    result = yield
            except Exception as e:
                self._skip_if_gpu_only(item, e)
                raise
            trace = triton_trace.current_trace()
            self._check(item, trace, opts, len(bench.ANSWERS) - answered)
            return result
        except KeyboardInterrupt:
            self._keep_interrupted(item, triton_trace.current_trace())
            raise
        finally:
            triton_trace.reset()

    def _keep_interrupted(self, item, trace) -> None:
        """Ctrl-C stopped this test: its launches so far (an interrupted launch keeps its completed programs)
        are saved with --triton-trace-dir, and the summary, which pytest still prints, says where."""
        path = None
        if self.dir and trace.launches:
            path = self._path(item, ".interrupted")
            trace.save(path)
        self.interrupted = (item.nodeid, len(trace.launches), path)

    def _path(self, item, suffix: str = "", ext: str = ".ttrace") -> str:
        os.makedirs(self.dir, exist_ok=True)
        return os.path.join(self.dir, re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[:150] + suffix + ext)

    def _save(self, item, trace, report, record: dict) -> str:
        """The test's trace, and its findings beside it (the report's ``to_dict()``, when it was analysed),
        for ``triton-trace view``; the record the summary reads says so."""
        path = self._path(item)
        trace.save(path)
        if report is not None:
            import json
            with open(self._path(item, ext=".findings.json"), "w") as f:
                json.dump(report.to_dict(), f, indent=1)
        self.saved.append(path)
        record["saved"] = path
        return path

    def _skip_if_gpu_only(self, item, exc: BaseException) -> None:
        what = _gpu_only(exc, self.cuda)
        if what is not None:
            item.user_properties.append((PROPERTY, {"requires_gpu": what}))
            # reported at the test, not here (what pytest's own skip markers do)
            raise pytest.skip.Exception(REQUIRES_GPU + what, _use_item_location=True) from exc

    def _check(self, item, trace, opts, bench: int = 0) -> None:
        record = {"launches": len(trace.launches), "kinds": [], "failed": False, "bench": bench}
        if not trace.launches or self.findings == "off":
            if trace.launches and self.save_all:
                self._save(item, trace, None, record)
            item.user_properties.append((PROPERTY, record))
            return
        import triton_trace
        report = triton_trace.analyze(trace, layouts="model", what_if=False)     # findings only: no compile
        found = {f.kind for f in report.findings} | {k for k, n in report.finding_counts.items() if n}
        expect = opts.get("expect")
        expected = {expect} if isinstance(expect, str) else set(expect or ())
        failing = (found - expected) if self.kinds is None else (found & self.kinds) - expected
        missing = expected - found
        fails = self.findings == "fail" and bool(failing or missing)
        record.update(kinds=sorted(found), failed=fails)
        path = self._save(item, trace, report, record) if self.dir and (self.save_all or failing or missing) \
            else None
        item.user_properties.append((PROPERTY, record))
        if not (failing or missing):
            return
        lines = []
        if failing:
            lines.append(f"triton_trace found {', '.join(sorted(failing))} in the kernels this test launched:")
            lines.append(report.summary())
        if missing:
            lines.append(f"triton_trace: the test expected {', '.join(sorted(missing))} findings and found none")
        if path is not None:
            lines.append(f"trace saved: open it with  triton-trace view {path}")
        if not fails:
            item.warn(pytest.PytestWarning("\n".join(lines)))
            return
        pytest.fail("\n".join(lines), pytrace=False)

    # -- one summary, also from xdist workers' reports -----------------------------------------------------
    def pytest_runtest_logreport(self, report):
        for name, value in getattr(report, "user_properties", ()):
            if name != PROPERTY:
                continue
            if report.skipped and "requires_gpu" in value:
                self.requires_gpu.setdefault(value["requires_gpu"], []).append(report.nodeid)
            elif report.when == "call" and "launches" in value:
                self.results.append((report.nodeid, value["launches"], value["kinds"], value["failed"]))
                self.bench += value.get("bench", 0)
                self.saved_tests += "saved" in value
                if report.passed and not value["launches"]:
                    self.hollow.append(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter):
        if hasattr(terminalreporter.config, "workerinput"):       # an xdist worker: the controller reports
            return
        traced = [r for r in self.results if r[1]]
        bad = [r for r in self.results if r[3]]
        launches = sum(r[1] for r in self.results)
        tr = terminalreporter
        tr.section("triton_trace")
        if self.cuda:
            tr.write_line(f"CUDA on the CPU: {tr.config.stash[REDIRECT].describe()}")
        tr.write_line(f"{len(traced)} test(s) launched {launches} traced kernel launch(es); "
                      f"{len(bad)} failed on findings")
        for nodeid, _, kinds, _ in bad[:50]:
            tr.write_line(f"  {nodeid}: {', '.join(kinds) or 'an expected finding was missing'}")
        warned = [r for r in self.results if r[2] and not r[3]] if self.findings == "warn" else []
        if warned:
            tr.write_line(f"{len(warned)} test(s) had findings (--tt-findings=warn: warned, not failed)")
        if self.hollow:
            tr.write_line(f"{len(self.hollow)} passed test(s) launched no Triton kernel (hollow: they tested "
                          f"torch, not a kernel)")
            for nodeid in self.hollow[:20]:
                tr.write_line(f"  {nodeid}")
        if self.requires_gpu:
            n = sum(len(v) for v in self.requires_gpu.values())
            tr.write_line(f"{n} test(s) skipped, {REQUIRES_GPU}" + "; ".join(
                f"{what} ({len(ids)})" for what, ids in sorted(self.requires_gpu.items())))
        if self.save_all:
            tr.write_line(f"{self.saved_tests} test(s) saved a trace and its findings in {self.dir} (--tt-save=all)")
        if self.bench:
            tr.write_line(f"{self.bench} triton.testing.do_bench call(s) answered with a predicted time "
                          f"(the analysis's roofline), not a measurement on a GPU")
        if self.interrupted is not None:
            nodeid, n, path = self.interrupted
            tr.write_line(f"interrupted (Ctrl-C) in {nodeid} after {n} traced launch(es)" +
                          (f": its trace saved, open it with  triton-trace view {path}" if path else
                           "; --triton-trace-dir DIR saves them" if n else ""))
            if self.saved:
                which = "" if self.save_all else "failing "
                tr.write_line(f"{len(self.saved)} trace(s) of {which}tests saved before it in {self.dir}")
