"""The trace file: a versioned, signed header of typed fields and bounded blocks.

- ``tracefile.py``: ``save`` and ``load`` (``triton_trace.save``/``triton_trace.load``).
- ``header.py``: the header's fields, each validated when read; an untrusted file is data, never run.
- ``signing.py``: the local key's signature over a file this machine wrote.
"""
