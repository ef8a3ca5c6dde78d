"""How numbers read everywhere: the CLI, the report and its hints, notebooks and the web UI (frontend/units.js
is this module's twin, line for line, and tests/analysis/test_units.py checks they give the same strings).

One convention: decimal units (1 kB = 1000 B, as GPU bandwidths and profilers quote them), three significant
digits, no exponents. A before -> after pair gets as many more digits as it takes for a change to show:
"0.2 MB -> 0.2 MB" hid a 4% change. Rounding is from the float's exact binary value with ties away from zero,
which is what JavaScript's ``toFixed`` does, so both sides agree digit for digit.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Context, Decimal

DIGITS = 3
MAX_DIGITS = 9            # a pair that still reads the same here differs by less than a part in 10**8
BYTE_UNITS = ("B", "kB", "MB", "GB", "TB")
_CONTEXT = Context(prec=80)


def _fixed(v: float, decimals: int) -> str:
    text = format(Decimal(v).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP, context=_CONTEXT), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "0") else text


def _int_digits(a: float) -> int:
    """The e with 10**(e-1) <= a < 10**e, by products and quotients that are exact IEEE operations in both
    languages (a log10 is not)."""
    if a >= 1:
        e, p = 1, 10.0
        while a >= p:
            e, p = e + 1, p * 10
        return e
    e, p = 0, 0.1
    while a < p:
        e, p = e - 1, p / 10
    return e


def sig(v: float, digits: int = DIGITS) -> str:
    """``v`` to ``digits`` significant digits, trailing zeros dropped: 0.000123, 1.23, 123, 12346."""
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if v == 0:
        return "0"
    return _fixed(v, max(digits - _int_digits(abs(v)), 0))


def nbytes(n, digits: int = DIGITS) -> str:
    """A byte count in B, kB, MB, GB or TB: 512 B, 1.5 kB, 205 kB, 12.3 MB."""
    if n is None:
        return "-"
    v, i = float(n), 0
    while abs(v) >= 1000 and i < len(BYTE_UNITS) - 1:
        v, i = v / 1000, i + 1
    text = sig(v, digits)
    if abs(float(text)) >= 1000 and i < len(BYTE_UNITS) - 1:     # 999.96 kB rounds to the next unit
        v, i = v / 1000, i + 1
        text = sig(v, digits)
    return f"{text} {BYTE_UNITS[i]}"


def percent(share, digits: int = DIGITS) -> str:
    """A share (0.333) as a percentage: 33.3%."""
    return "-" if share is None else sig(100 * float(share), digits) + "%"


def seconds(t, digits: int = DIGITS) -> str:
    """A duration in ns, us, ms or s."""
    if t is None:
        return "-"
    t = float(t)
    a = abs(t)
    if a < 1e-6:
        return sig(t / 1e-9, digits) + " ns"
    if a < 1e-3:
        return sig(t / 1e-6, digits) + " us"
    if a < 1:
        return sig(t / 1e-3, digits) + " ms"
    return sig(t, digits) + " s"


def change(before, after, fmt=nbytes) -> str:
    """``before -> after`` in ``fmt`` (nbytes, percent, seconds, sig), with more digits until two values
    that differ read differently."""
    digits = DIGITS
    a, b = fmt(before, digits), fmt(after, digits)
    while a == b and before != after and digits < MAX_DIGITS:
        digits += 1
        a, b = fmt(before, digits), fmt(after, digits)
    return f"{a} -> {b}"


def metric(key: str, v) -> str:
    """A report metric by its name's convention: ``*_bytes`` in bytes, ``*_share`` and ``*_efficiency``
    as shares, counts with thousands separators (frontend: fmtMetric)."""
    if v is None:
        return "-"
    if key.endswith("_bytes"):
        return nbytes(v)
    if key.endswith(("_share", "_efficiency")):
        return percent(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return sig(v)


def place(file, line=None) -> str:
    """A source location as IPython names it: "cell In[8], line 6" for a notebook cell (view/cells.py names
    them), "name.py:6" for a file."""
    name = str(file or "")
    if re.fullmatch(r"cell In\[\d*\]", name):
        return f"{name}, line {line}" if line else name
    base = re.split(r"[\\/]", name)[-1]
    return f"{base}:{line}" if line else base
