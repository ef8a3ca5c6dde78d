"""Advice: what could be faster, and what the GPU will do that the trace did not. Never findings.

- ``hints.py``: what a source line's memory ops waste and what fixing them saves.
- ``whatif.py``: the same accesses replayed in another order or on another GPU (uses ``analysis/memory``).
- ``roofline.py``: FLOPs, arithmetic intensity and a lower bound on each GPU's time.
- ``predictions.py``: int32 offsets that wrap at a larger size, float32 dots that run in TF32.
- ``precision.py``: fp16/bf16 sums that drift from the same sum in float64.
- ``shadow.py``: where precision is lost, per source line, from the float64 shadow; ``shadowrun.py`` runs a
  launch kept with its inputs again with the shadow (``analyze(..., shadow="float64")``).
"""
