"""Runtime checks that need values as they are computed: nonfinite (where a NaN or Inf was born) with its
arithmetic hooks nonfinite_ops, overflow (integers that do not fit their type) with overflow_ops."""
