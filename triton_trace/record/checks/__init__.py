"""Runtime checks that need values as they are computed, one row each in table.py (the list the hooks install,
the collector drives and the trace file's header checks the records of), each a monitor of monitor.py's
protocol (begin, set_active, mark, rollback, records) whose records are declared with schema.py's fields:
nonfinite (where a NaN or Inf was born) with its arithmetic hooks nonfinite_ops; overflow (integers that do
not fit their type) with overflow_ops, whose tags also carry intdiv's undefined integer divisions; lanes
(two lanes of one store, one address, two values); addresses (the int32 offsets behind each memory op);
tf32 (float32 dots computed as the GPU's TF32); padding (a masked load's ``other=`` reaching a reduction);
barriers (``tl.debug_barrier()`` as an op row, each atomic line's ``sem``: what analysis/checks/barriers.py
reads beside the op order); accumulation (fp16/bf16 sums against the same sum in float64)."""

# the attribute overflow_ops attaches to a value holding wrapped lanes: (cause dict, bool lanes); here so
# batch/compact.py can carry it without importing the hooks
OVERFLOW_TAG = "_tt_overflow"
