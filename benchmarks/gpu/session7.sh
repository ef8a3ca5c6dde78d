#!/usr/bin/env bash
# The GPU calls of 2026-12-07 (fourth session), after the tensor-core dot model, reverse scans, canonical NaNs
# and the op_ld-only counter rows:
#   part 1: the whole language-test comparison with numerics="compiled", the 13 matmul counter cases, the
#           inline-PTX rerun;        run(command="cd .gpusnap && bash benchmarks/gpu/session7.sh 1", carry=[".gpusnap"])
#   part 2: FlagGems' and fla's test launches with numerics="compiled" (each library its own budget)
#                                    run(command="cd .gpusnap && bash benchmarks/gpu/session7.sh 2", carry=[".gpusnap"])
#   libs:   the two libraries only, each stopped at a hard limit keeping what it compared (230 s)
#   all:    the comparison and both libraries in one call of 560 s, on smaller budgets (when device time is short)
#                                    run(command="cd .gpusnap && bash benchmarks/gpu/session7.sh all", carry=[".gpusnap"])
# where .gpusnap is `git archive HEAD` plus .lib and .whl-lib (benchmarks/fidelity/fetch_libraries.sh).
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/machine.txt" 2>&1
left() { echo $(( ${TOTAL:-545} - ($(date +%s) - start) )); }
if [ "${1:-1}" = libs ]; then      # the last minutes of device time: each library stopped at a hard limit
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
    > "$R/pip.log" 2>&1; step pip $?
  export PYTHONPATH=$PWD:/tmp/libsite GEMS_VENDOR=nvidia
  for lib in flaggems:45:90 fla:75:125; do IFS=: read -r name budget limit <<< "$lib"
    timeout $((limit + 20)) python3 benchmarks/fidelity/library_launches.py --out "$R/$name" --lib-root .lib \
      --libraries "$name" --workers 16 --budget "$budget" --limit "$limit" --timeout 40 --numerics compiled \
      > "$R/$name.log" 2>&1; step "$name" $?
  done
elif [ "${1:-1}" = all ]; then
  timeout 250 python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" --workers 16 --budget 195 \
    --timeout 60 --numerics compiled > "$R/launches_compiled.log" 2>&1; step launches_compiled $?
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
    > "$R/pip.log" 2>&1; step pip $?
  export PYTHONPATH=$PWD:/tmp/libsite GEMS_VENDOR=nvidia
  timeout 100 python3 benchmarks/fidelity/library_launches.py --out "$R/flaggems" --lib-root .lib --libraries flaggems \
    --workers 16 --budget 55 --timeout 40 --numerics compiled > "$R/flaggems.log" 2>&1; step flaggems $?
  b=$(left); [ "$b" -gt 90 ] && timeout $((b - 5)) python3 benchmarks/fidelity/library_launches.py --out "$R/fla" \
    --lib-root .lib --libraries fla --workers 16 --budget $((b - 70)) --timeout 60 --numerics compiled \
    > "$R/fla.log" 2>&1; step fla $?
elif [ "${1:-1}" = 1 ]; then
  timeout 330 python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" --workers 15 --budget 270 \
    --timeout 120 --numerics compiled > "$R/launches_compiled.log" 2>&1; step launches_compiled $?
  rm -f "$R"/launches_compiled/launches.jsonl.gz
  NEW=$(PYTHONPATH=benchmarks/fidelity:tests python3 -c "
import metric_cases as m; print(','.join(c.name for c in m.MAIN if c.name.startswith('matmul_') and not c.name.startswith(('matmul_2k', 'matmul_big'))))")
  timeout 100 python3 benchmarks/fidelity/fidelity.py --out "$R/counters" --cases "$NEW" --no-outputs --budget 80 \
    > "$R/counters.log" 2>&1; step counters $?
  timeout 90 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1; step inline_asm $?
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
    > "$R/pip.log" 2>&1; step pip $?
  export PYTHONPATH=$PWD:/tmp/libsite GEMS_VENDOR=nvidia
  timeout 200 python3 benchmarks/fidelity/library_launches.py --out "$R/flaggems" --lib-root .lib --libraries flaggems \
    --workers 16 --budget 110 --timeout 60 --numerics compiled > "$R/flaggems.log" 2>&1; step flaggems $?
  timeout 330 python3 benchmarks/fidelity/library_launches.py --out "$R/fla" --lib-root .lib --libraries fla \
    --workers 16 --budget 220 --timeout 90 --numerics compiled > "$R/fla.log" 2>&1; step fla $?
fi
rm -f "$R"/*/launches.jsonl.gz
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
