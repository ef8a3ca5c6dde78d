#!/usr/bin/env bash
# Issue 42, item 1 through the suite mode: every Triton launch of a slice of FlagGems' and fla's own test suites
# on the GPU against its trace (benchmarks/fidelity/library_launches.py, about 200 s), then the whole
# language-test comparison with numerics="compiled" in the rest of 560 s. Before it, here:
#   bash benchmarks/fidelity/fetch_libraries.sh .lib .whl-lib      # the two libraries at their commits, SQLAlchemy
#   run(command="bash benchmarks/gpu/session6.sh", carry=[".lib", ".whl-lib"])
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
start=$(date +%s)
step() { echo "$1 rc $2 at $(( $(date +%s) - start )) s" >> "$R/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/libsite .whl-lib/*.whl \
  > "$R/pip.log" 2>&1; step pip $?
export PYTHONPATH=$PWD:/tmp/libsite PYTHONUNBUFFERED=1 GEMS_VENDOR=nvidia
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/machine.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|numpy|transformers|einops|pyyaml|packaging|pytest|sqlalchemy)" \
  >> "$R/machine.txt"
( cd .lib/flaggems && PYTHONPATH=src:$PYTHONPATH python3 -c "import flag_gems; print('flag_gems', flag_gems.device)" \
  && cd ../fla && PYTHONPATH=.:$PYTHONPATH python3 -c "import fla; print('fla', fla.__version__)" ) > "$R/imports.log" 2>&1
step imports $?
# FlagGems until 63 s, fla until 125 s (what FlagGems leaves over goes to fla); a test started before then may
# run 60 s more
timeout 200 python3 benchmarks/fidelity/library_launches.py --out "$R/libraries" --lib-root .lib --workers 16 \
  --budget 125 --timeout 60 > "$R/libraries.log" 2>&1; step libraries $?
b=$(( ${TOTAL:-560} - ($(date +%s) - start) ))
[ "$b" -gt 120 ] && timeout $((b + 10)) python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" --workers 16 \
  --budget $((b - 60)) --timeout 120 --numerics compiled > "$R/launches_compiled.log" 2>&1; step launches_compiled $?
rm -f "$R"/launches_compiled/launches.jsonl.gz
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
