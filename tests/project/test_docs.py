"""The README's findings table names every finding kind the analysis has, with the kinds table's severity
(analysis/findings.py KINDS), and the docs index links every page under docs/."""
from __future__ import annotations

import os
import re

from triton_trace.analysis.findings import KINDS
from helpers.paths import ROOT


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_the_readme_findings_table_lists_every_kind_with_its_severity():
    rows = dict(re.findall(r"^\| `(\w+)` \| (error|warning) \|", _readme(), flags=re.M))
    assert rows == {kind: severity for kind, severity, _ in KINDS}


def test_every_docs_page_is_reachable_from_the_readme():
    text = _readme()
    pages = sorted(f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md") and f != "index.md")
    missing = [p for p in pages if f"(docs/{p})" not in text]
    assert not missing, missing
