"""The documentation site: built by MkDocs with warnings as errors, complete, and self-contained.

The site is docs/*.md with the API reference read from the docstrings by mkdocstrings (mkdocs.yml). A
broken link, a page missing from the navigation, a reference entry whose object no longer exists, or a
docstring mkdocstrings cannot read fails the build, so the docs cannot drift from the code unnoticed.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "mkdocs.yml").exists() and ROOT != ROOT.parent:   # wherever this module sits under tests/
    ROOT = ROOT.parent

pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _lazy_names() -> dict:
    """The package's public names -> (module, attribute) (importing triton_trace is inert: nothing loads)."""
    import triton_trace
    return dict(triton_trace._LAZY)


def test_the_site_builds_strict_with_every_page(site):
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.parent.name if p.parent != site else "index" for p in site.rglob("index.html")}
    assert pages <= built | {"index"}, pages - built
    assert (site / "img").is_dir() and list((site / "img").glob("*.png"))


def test_every_public_name_has_a_reference_entry(site):
    html = (site / "reference" / "index.html").read_text()
    missing = [f"{name} ({module}.{attr})" for name, (module, attr) in _lazy_names().items()
               if f'id="{module}.{attr}"' not in html]       # mkdocstrings anchors an entry by its path
    assert not missing, "add to docs/reference.md: " + ", ".join(missing)


def test_entries_carry_their_docstrings(site):
    """The entries hold the docstrings' text, not only headings: the first words of a few, found in the page."""
    import ast
    html = " ".join(re.sub(r"<[^>]+>", "", (site / "reference" / "index.html").read_text()).split())
    src = ast.parse((ROOT / "triton_trace" / "store" / "tracefile.py").read_text())
    for fn in (n for n in src.body if isinstance(n, ast.FunctionDef) and n.name in ("save", "load")):
        words = " ".join(ast.get_docstring(fn).replace("``", "").split()[:5])
        assert words in html, f"{fn.name}: {words!r} not in the reference page"


def test_no_page_loads_anything_from_another_host(site):
    offenders = []
    for page in site.rglob("*.html"):
        for m in re.finditer(r'<(script|link|img)\b[^>]*?(?:src|href)="(https?:)?//[^"]+"', page.read_text()):
            offenders.append(f"{page.relative_to(site)}: {m.group(0)[:120]}")
    assert not offenders, offenders
