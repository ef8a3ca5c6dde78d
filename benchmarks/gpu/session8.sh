#!/usr/bin/env bash
# The GPU calls of 2026-12-07 (fifth session), two calls back to back on one warm machine:
#   libs:  FlagGems' and fla's own test launches with numerics="compiled", each stopped at a hard limit keeping
#          what it compared (`--limit`), then the inline-PTX rerun (100 snippets x 65,536 inputs)
#                                    run(command="cd .gpusnap && bash benchmarks/gpu/session8.sh libs", carry=[".gpusnap"])
#   flaggems: FlagGems alone      run(command="cd .gpusnap && bash benchmarks/gpu/session8.sh flaggems", carry=[".gpusnap"])
#   counters: the 13 matmul counter cases alone, with the L2 request coalescer's counters
#                                    run(command="cd .gpusnap && TOTAL=200 bash benchmarks/gpu/session8.sh counters", carry=[".gpusnap"])
#   whole: the whole language-test comparison with numerics="compiled" after the add-fold, split-dot and fp8
#          fixes, on a budget that starts every test; then the 13 matmul counter cases with the L2 request
#          coalescer's counters
#                                    run(command="cd .gpusnap && bash benchmarks/gpu/session8.sh whole", carry=[".gpusnap"])
# where .gpusnap is `git archive HEAD` plus .lib and .whl-lib (benchmarks/fidelity/fetch_libraries.sh).
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
left() { echo $(( ${TOTAL:-560} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/machine.txt" 2>&1
# the L2 request coalescer's counters (the L2 hit-rate rows: fewer L2 read lookups than L1 sectors sent)
(ncu --query-metrics 2>&1 | grep -i -E "^lrc|coalesc" > "$R/lrc_metrics.txt") 2>/dev/null
if [ "${1:-libs}" = libs ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
    > "$R/pip.log" 2>&1; step pip $?
  export PYTHONPATH=$PWD:/tmp/libsite GEMS_VENDOR=nvidia
  timeout 140 python3 benchmarks/fidelity/library_launches.py --out "$R/flaggems" --lib-root .lib \
    --libraries flaggems --workers 16 --budget 90 --limit 120 --timeout 40 --numerics compiled \
    > "$R/flaggems.log" 2>&1; step flaggems $?
  lim=$(( $(left) - 125 ))     # what is left, less the inline-PTX run and the packing
  timeout $((lim + 15)) python3 benchmarks/fidelity/library_launches.py --out "$R/fla" --lib-root .lib \
    --libraries fla --workers 16 --budget $((lim - 40)) --limit "$lim" --timeout 60 --numerics compiled \
    > "$R/fla.log" 2>&1; step "fla(limit $lim)" $?
  timeout 90 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1
  step inline_asm $?
elif [ "${1:-libs}" = flaggems ]; then    # FlagGems alone (the contraction of products into sums, rechecked)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
    > "$R/pip.log" 2>&1; step pip $?
  export PYTHONPATH=$PWD:/tmp/libsite GEMS_VENDOR=nvidia
  timeout 140 python3 benchmarks/fidelity/library_launches.py --out "$R/flaggems" --lib-root .lib \
    --libraries flaggems --workers 16 --budget 90 --limit 120 --timeout 40 --numerics compiled \
    > "$R/flaggems.log" 2>&1; step flaggems $?
elif [ "${1:-libs}" = counters ]; then     # the matmul counter cases alone (the L2 coalescer's counters)
  NEW=$(PYTHONPATH=benchmarks/fidelity:tests python3 -c "
import metric_cases as m; print(','.join(c.name for c in m.MAIN if c.name.startswith('matmul_') and not c.name.startswith(('matmul_2k', 'matmul_big'))))")
  timeout $(( $(left) - 10 )) python3 benchmarks/fidelity/fidelity.py --out "$R/counters" --cases "$NEW" --no-outputs \
    --budget $(( $(left) - 40 )) > "$R/counters.log" 2>&1; step counters $?
else
  timeout 380 python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" --workers 16 --budget 300 --limit 350 \
    --timeout 90 --numerics compiled > "$R/launches_compiled.log" 2>&1; step launches_compiled $?
  # the 13 matmul counter cases again, now with the L2 request coalescer's counters (metric_measure.PREFIXES)
  NEW=$(PYTHONPATH=benchmarks/fidelity:tests python3 -c "
import metric_cases as m; print(','.join(c.name for c in m.MAIN if c.name.startswith('matmul_') and not c.name.startswith(('matmul_2k', 'matmul_big'))))")
  b=$(left); [ "$b" -gt 60 ] && timeout $((b - 10)) python3 benchmarks/fidelity/fidelity.py --out "$R/counters" \
    --cases "$NEW" --no-outputs --budget $((b - 30)) > "$R/counters.log" 2>&1; step counters $?
fi
rm -f "$R"/*/launches.jsonl.gz "$R"/*/*/launches.jsonl.gz
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
