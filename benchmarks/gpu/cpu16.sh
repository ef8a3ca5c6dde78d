#!/usr/bin/env bash
# Issue 45's 16-core numbers, on the GPU machine's CPUs (16 cores): the peers table (benchmarks/speed/peers.py)
# and trace(workers=N) from 1 to 16 (bench_workers.py). Needs TileLens 3.1.1 and its imports as wheels in
# .whl/ (tilelens, anytree, tqdm, ml_dtypes, z3-solver 4.15.3.0, numpy 2.3.5: TileLens' own numpy, apart from
# the machine's): run(command="bash benchmarks/gpu/cpu16.sh", carry=[".whl", ...]). ttsem 0.1.0 needs Triton
# 3.8 beside the machine's 3.6 and is not run here.
# Phase A runs three single-threaded groups of cells side by side, each pinned to its own core (the plain
# interpreter; TileLens' tracer; triton_trace traced + analysed, and the numpy floor, which needs the traced cells); phase B then has the machine to itself for
# torch eager (all 16 threads) and the worker counts.
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/tlsite .whl/*.whl > "$R/pip.log" 2>&1
printf '#!/bin/sh\nPYTHONPATH=/tmp/tlsite exec python3 "$@"\n' > /tmp/tlpy && chmod +x /tmp/tlpy
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PEERS_MAIN_PYTHON=python3 PEERS_TILELENS_PYTHON=/tmp/tlpy
nproc > "$R/machine.txt"; lscpu | grep -E "Model name|^CPU\(s\)" >> "$R/machine.txt"
P="python3 benchmarks/speed/peers.py --size ${SIZE:-full} --repeat 3 --long 10 --timeout ${CELL_TIMEOUT:-45}"
start=$(date +%s)
( taskset -c 0 $P --tools plain --json "$R/plain.json" > "$R/plain.log" 2>&1; echo "plain rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt" ) &
( taskset -c 1 $P --tools tl_tracer --json "$R/tilelens.json" > "$R/tilelens.log" 2>&1; echo "tilelens rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt" ) &
( taskset -c 2 $P --tools traced,analysed,floor --json "$R/ours.json" > "$R/ours.log" 2>&1; echo "ours rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt" ) &
wait
$P --tools torch --json "$R/torch.json" > "$R/torch.log" 2>&1; echo "torch rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
b=$(( ${TOTAL:-540} - ($(date +%s) - start) ))
[ "$b" -gt 60 ] && timeout "$b" python3 benchmarks/speed/bench_workers.py --repeat 2 --workers 1,2,4,8,16 > "$R/workers.log" 2>&1
echo "workers rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
tar -czf "$OUT/cpu16.tgz" -C "$OUT" r && rm -rf "$R"
