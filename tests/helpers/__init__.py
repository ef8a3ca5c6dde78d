"""What the tests share, one module per role (tests/conftest.py puts tests/ on sys.path, so a test module in
any stage folder imports ``from helpers.x import ...``). No test module imports another test module, and
nothing here imports a test module (tests/project/test_architecture.py checks both). Kernels live in
tests/kernels/, not here."""
