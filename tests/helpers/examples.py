"""The examples (examples/*.py) as the tests load them: a fresh module each time, without running main()."""
from __future__ import annotations

import importlib.util
import os

from helpers.paths import ROOT

EXAMPLES = os.path.join(ROOT, "examples")


def path(name: str) -> str:
    return os.path.join(EXAMPLES, f"{name}.py")


def load(name: str):
    """examples/<name>.py as a new module named ``name`` (its ``if __name__ == "__main__"`` part does not run)."""
    spec = importlib.util.spec_from_file_location(name, path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
