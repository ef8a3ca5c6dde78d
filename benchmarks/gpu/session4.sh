#!/usr/bin/env bash
# The last GPU call of 2026-12-07 (after session2.sh): the inline-PTX comparison after the fixes from its
# first run (signed zeros, canonical NaNs, rem by zero, relu halves; rcp.approx and div.full from the MUFU
# table), the probe of what that run left unmeasured, then the whole comparison with numerics="compiled":
#   run(command="bash benchmarks/gpu/session4.sh")
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=. PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
timeout 120 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1; step inline_asm $?
# the GPU's bits where the first run had none (benchmarks/fidelity/ptx_probe/; compare here with
# `python benchmarks/fidelity/ptx_probe/compare.py <files_at>/r/probe`)
mkdir -p "$R/probe" && python3 benchmarks/fidelity/ptx_probe/mkcases.py > /dev/null
( for p in 0 1 2; do OUT="$R/probe" timeout 100 python3 benchmarks/fidelity/ptx_probe/probe.py probe $p 3 & done
  for p in 0 1; do OUT="$R/probe" timeout 100 python3 benchmarks/fidelity/ptx_probe/probe.py bench $p 2 & done; wait ) \
  > "$R/probe.log" 2>&1; step probe $?
b=$(( ${TOTAL:-480} - ($(date +%s) - start) ))
[ "$b" -gt 90 ] && timeout $((b + 10)) python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" --workers 16 \
  --budget $((b - 40)) --timeout 120 --numerics compiled > "$R/launches_compiled.log" 2>&1; step launches_compiled $?
rm -f "$R"/*/launches.jsonl.gz
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
