"""This user's signature on the trace files they save, so their own files stay fully featured.

A trace file is data anyone can craft; its kernel source is compiled or run only when the user trusts it.
Files this user saves carry an HMAC-SHA256 of their header under the local key (cachedir.py: 32 random
bytes in the private cache), appended as the header's last member, ``,"signature":"<hex>"}``; loading
recomputes it. Only the header is signed: it holds everything that is ever compiled or run (sources,
helpers, imports, constants, arguments); the array blocks are numbers, bounded and validated as data.
A file from anyone else (or saved where the key could not be used) verifies as unsigned.
"""
from __future__ import annotations

import re

from ..cachedir import CacheUnusable, local_key, mac, same_mac

CONTEXT = b"triton_trace trace header v1"
_SUFFIX = re.compile(rb',"signature":"([0-9a-f]{64})"\}\Z')


def sign(header: bytes) -> bytes:
    """``header`` (a JSON object's bytes) with the signature member added; unchanged without a usable key."""
    try:
        key = local_key()
    except CacheUnusable:
        return header
    return header[:-1] + b',"signature":"' + mac(key, CONTEXT, header).encode() + b'"}'


def verify(raw: bytes) -> bool:
    """Whether ``raw`` (a header as read from a file) carries this user's signature of the rest of it."""
    m = _SUFFIX.search(raw)
    if m is None:
        return False
    try:
        key = local_key(create=False)
    except CacheUnusable:
        return False
    return same_mac(m.group(1).decode(), mac(key, CONTEXT, raw[:m.start()] + b"}"))
