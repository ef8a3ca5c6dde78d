"""``python -m triton_trace`` is the ``triton-trace`` command."""
import sys

from .cli import main

sys.exit(main())
