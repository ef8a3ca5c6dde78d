"""Where things are, for tests in any folder under tests/ (never computed from a test file's own place)."""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
TESTS = os.path.join(ROOT, "tests")
SCRIPTS = os.path.join(TESTS, "scripts")          # scripts the command-line tests run
FIXTURES = os.path.join(TESTS, "fixtures")
OUTPUT = os.environ.get("TT_TEST_OUTPUT", os.path.join(ROOT, "test-output"))   # screenshots, saved pages
