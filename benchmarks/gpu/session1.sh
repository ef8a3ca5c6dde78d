#!/usr/bin/env bash
# One GPU-machine call that runs the pending GPU comparisons in order, each under its own time limit, and
# leaves every result in one tarball under $OUT (the machine returns only a few files):
#   run(command="bash benchmarks/gpu/session1.sh", carry=["benchmarks/realbugs/vendor"])
# 1. the 100-snippet inline-PTX bit comparison, 2. real bugs 5-7 on the GPU, 3. the launch-by-launch rerun of
# test_scaled_dot and the inline-asm tests, 4. (time left) the numerics="compiled" launch rerun.
set -u
OUT=${OUT:?run on the GPU machine, where OUT is set}
R=$OUT/r; mkdir -p "$R"
export PYTHONPATH=. PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - start) )); }
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, numpy; print(torch.__version__, triton.__version__, numpy.__version__)"
} > "$R/env.txt" 2>&1
timeout 150 python3 benchmarks/fidelity/inline_asm.py --out "$R/inline_asm" > "$R/inline_asm.log" 2>&1
echo "inline_asm rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
OUT=$R/gpu_confirm timeout 170 python3 benchmarks/realbugs/gpu_confirm.py \
  --only unsloth_ce_softcap,liger_ce_softcap,liger_softmax_int32,liger_sparsemax_int32 > "$R/gpu_confirm.out" 2>&1
echo "gpu_confirm rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
b=$(left 470); [ "$b" -gt 60 ] && timeout $((b + 40)) python3 benchmarks/fidelity/launches.py --out "$R/launches_asm" \
  --workers 16 --budget $((b - 30)) --timeout 120 -k "test_scaled_dot or test_inline_asm" > "$R/launches_asm.log" 2>&1
echo "launches_asm rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
b=$(left 560); [ "$b" -gt 60 ] && timeout $((b + 20)) python3 benchmarks/fidelity/launches.py --out "$R/launches_compiled" \
  --workers 16 --budget $((b - 20)) --timeout 90 --numerics compiled -k "test_dot or test_bin_op or test_math_op" \
  > "$R/launches_compiled.log" 2>&1
echo "launches_compiled rc $? at $(( $(date +%s) - start )) s" >> "$R/steps.txt"
tar -czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$R"
