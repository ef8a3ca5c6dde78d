#!/usr/bin/env bash
# The first GPU call of 2026-12-07 (third session): the accumulation orders numerics="compiled" must follow
# (benchmarks/fidelity/order_probe.py: wgmma / mma.sync dots, reduction and scan trees), the nine new
# held-out-style matmul counter cases under Nsight Compute, then session4.sh's inline PTX rerun and probe:
#   run(command="bash benchmarks/gpu/session5.sh")
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=. PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/machine.txt" 2>&1
timeout 90 python3 benchmarks/fidelity/order_probe.py --out "$R/order" > "$R/order.log" 2>&1; step order $?
NEW=$(PYTHONPATH=benchmarks/fidelity:tests python3 -c "
import metric_cases as m; print(','.join(c.name for c in m.MAIN if c.name.startswith('matmul_') and not c.name.startswith(('matmul_2k', 'matmul_big'))))")
timeout 240 python3 benchmarks/fidelity/fidelity.py --out "$R/counters" --cases "$NEW" --no-outputs --budget 200 \
  > "$R/counters.log" 2>&1; step counters $?
[ -n "${NO_ASM:-}" ] || timeout 100 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1; step inline_asm $?
[ -n "${NO_ASM:-}" ] || { mkdir -p "$R/probe" && python3 benchmarks/fidelity/ptx_probe/mkcases.py > /dev/null
( for p in 0 1 2; do OUT="$R/probe" timeout 90 python3 benchmarks/fidelity/ptx_probe/probe.py probe $p 3 & done
  for p in 0 1; do OUT="$R/probe" timeout 90 python3 benchmarks/fidelity/ptx_probe/probe.py bench $p 2 & done; wait ) \
  > "$R/probe.log" 2>&1; step probe $?; }
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
