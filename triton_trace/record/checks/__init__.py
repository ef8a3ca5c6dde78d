"""Runtime checks that need values as they are computed, each installed from record/interp/hooks.py and fed
by the collector through monitor.py's protocol (begin, set_active, mark, rollback): nonfinite (where a NaN
or Inf was born) with its arithmetic hooks nonfinite_ops; overflow (integers that do not fit their type)
with overflow_ops, whose tags also carry intdiv's undefined integer divisions; lanes (two lanes of one
store, one address, two values); addresses (the int32 offsets behind each memory op); tf32 (float32 dots
computed as the GPU's TF32); padding (a masked load's ``other=`` reaching a reduction)."""

# the attribute overflow_ops attaches to a value holding wrapped lanes: (cause dict, bool lanes); here so
# batch/compact.py can carry it without importing the hooks
OVERFLOW_TAG = "_tt_overflow"
