"""A module that needs libcuda, imported at the top: the whole file is skipped, the run goes on."""
import needs_libcuda


def test_uses_the_driver():
    assert needs_libcuda
