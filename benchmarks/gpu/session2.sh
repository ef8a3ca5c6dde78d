#!/usr/bin/env bash
# The second GPU call of 2026-12-07 (after session1.sh): the fixed inline-PTX comparison, the MUFU tables,
# test_dot with numerics="compiled" after the split-dot change, and the whole launch-by-launch comparison:
#   run(command="bash benchmarks/gpu/session2.sh")
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=. PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
timeout 150 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1; step inline_asm $?
timeout 90 python3 benchmarks/fidelity/record_intrinsics.py --tables --out "$R/tables" > "$R/tables.log" 2>&1; step tables $?
timeout 150 python3 benchmarks/fidelity/launches.py --out "$R/dot_compiled" --workers 16 --budget 100 --timeout 90 \
  --numerics compiled -k "test_dot" > "$R/dot_compiled.log" 2>&1; step dot_compiled $?
b=$(( 540 - ($(date +%s) - start) ))
[ "$b" -gt 90 ] && timeout $((b + 10)) python3 benchmarks/fidelity/launches.py --out "$R/launches_all" --workers 16 \
  --budget $((b - 40)) --timeout 120 > "$R/launches_all.log" 2>&1; step launches_all $?
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
