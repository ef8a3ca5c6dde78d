#!/usr/bin/env bash
# The whole suite, plain and traced, on the GPU machine's 16 CPU cores (it has pytest-xdist and scipy; no
# install needed: the tracing core imports without Flask and plotly). From the repository root:
#   bash tests/triton_suite/on_gpu_machine.sh OUTDIR
# writes OUTDIR/summary.md (the table committed as benchmarks/suites/triton_suite/gpu_machine_3.6.md), summary.json,
# both junit files and both pytest outputs.
set -euo pipefail
out=${1:?usage: on_gpu_machine.sh OUTDIR}; shift
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c "import triton, numpy, torch; print('triton', triton.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__, 'cpus', __import__('os').cpu_count())"
python3 tests/triton_suite/run_suite.py --workers "${WORKERS:-16}" --out "$out" -- --timeout=600 "$@"
