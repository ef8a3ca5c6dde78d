import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(1, ROOT)       # benchmarks/ (measurement scripts some tests import)


@pytest.fixture(autouse=True)
def _fresh_trace():
    """Every test starts with an empty current trace."""
    import triton_trace
    triton_trace.reset()
    yield
    triton_trace.reset()

# Triton's own test suite, vendored as test data: run through tests/triton_suite/run_suite.py, never
# collected as part of this project's tests.
collect_ignore = ["triton_suite", "plugin_suite", "plugin_suite_gpu", "cuda_suite", "cuda_suite_bad"]


@pytest.fixture
def make_client():
    """``make_client(trace, **create_app_kwargs)``: a Flask test client of the web app over ``trace`` that
    sends the X-TT-Client header with every request, as the page does (``page=False``: without it, as a
    page on another site would)."""
    from triton_trace.view.app import create_app

    def make(trace, page: bool = True, **kwargs):
        client = create_app(trace, **kwargs).test_client()
        if page:
            client.environ_base["HTTP_X_TT_CLIENT"] = "1"
        return client
    return make


@pytest.fixture(scope="module")
def small_trace():
    """One traced launch of a 100-element vector add (block 64: the last program masked), per module."""
    import kernels as K
    import torch
    import triton_trace
    triton_trace.reset()
    K.add(torch.randn(100), torch.randn(100), kernel=triton_trace.trace(K.make_add()), block=64)
    t = triton_trace.current_trace()
    triton_trace.reset()
    return t


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions"]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright (its own browser download does not work here), per module."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
