#!/usr/bin/env bash
# A short GPU call (what a nearly spent device budget allows): the MUFU per-binade tables first, then the
# inline-PTX comparison, each in its own time limit:   run(command="bash benchmarks/gpu/session3.sh")
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
export PYTHONPATH=. PYTHONUNBUFFERED=1
timeout 45 python3 benchmarks/fidelity/record_intrinsics.py --tables --out "$OUT/tables" > "$OUT/tables.log" 2>&1
echo "tables rc $?" >> "$OUT/steps.txt"
timeout 75 python3 benchmarks/fidelity/inline_asm.py --budget 55 --out "$OUT/inline_asm" > "$OUT/inline_asm.log" 2>&1
echo "inline_asm rc $?" >> "$OUT/steps.txt"
