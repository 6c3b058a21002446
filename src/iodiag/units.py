"""Numbers as text, one way everywhere: bytes, seconds, percent, counts.

Every output (finding titles and advice in the JSON report, the terminal report, HTML and its plots, compare,
the site report, sweeps) formats through these functions, so one quantity reads the same wherever it shows:

- ``fmt_bytes``: binary units, one decimal (``5.0 TiB``, whole bytes below 1 KiB: ``512 B``); ``sig=True``
  gives three significant digits without needless decimals (``16 KiB``, ``1.5 MiB``: axis labels); ``si=True``
  decimal units (``100 MB``: Dask's chunk guidance and the recommender's features are decimal).
- ``fmt_seconds``: ``1.2 h``, ``1,234 s``, ``12.34 s``, ``4.20 ms``.
- ``fmt_pct``: a share (0.25) as ``25%``, with the decimals a small share (``0.50%``, ``0.002%``) or one just
  under the whole (``99.500%``) needs; ``signed=True`` for changes (``+12%``).
- ``fmt_count``: an exact count, thousands separated (``12,345``); ``fmt_compact``: three significant digits
  with k/M/G/T (``12.3k``: axes, site tables; an optional unit such as `` h``); ``fmt_number``: a measure
  without a unit (``1,234``, ``12.35``, ``0.0123``).

None and NaN read "-" in every formatter.  Nothing here imports the rest of iodiag.
"""

from __future__ import annotations

import math
from typing import Any

BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
MISSING = "-"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def binary_scale(n: float, *, si: bool = False) -> tuple[int, float]:
    """(k, divisor): the unit index of ``n`` in BINARY_UNITS (DECIMAL_UNITS with ``si``) and 1024**k (1000**k)."""
    base = 1000.0 if si else 1024.0
    k = 0
    v = abs(float(n))
    while v >= base and k < len(BINARY_UNITS) - 1:
        v /= base
        k += 1
    return k, base ** k


def fmt_bytes(n: Any, *, sig: bool = False, si: bool = False) -> str:
    """A byte count in its unit (see the module docstring)."""
    if _missing(n):
        return MISSING
    units = DECIMAL_UNITS if si else BINARY_UNITS
    base = 1000.0 if si else 1024.0
    v, k = float(n), 0
    while abs(v) >= base and k < len(units) - 1:
        v /= base  # a power of two: exact, so the same as one division by base ** k
        k += 1
    if sig:  # 1000-1023 of a unit keep their fourth digit (never "1.02e+03 B")
        return f"{v:.4g} {units[k]}" if abs(v) >= 999.5 else f"{v:.3g} {units[k]}"
    return f"{int(v)} B" if k == 0 else f"{v:.1f} {units[k]}"


def fmt_seconds(x: Any) -> str:
    """Seconds in hours from an hour on, whole seconds from 100 s, milliseconds below 10 ms."""
    if _missing(x):
        return MISSING
    x = float(x)
    if x >= 3600:
        return f"{x / 3600:.1f} h"
    if x >= 100:
        return f"{x:,.0f} s"
    return f"{x:.2f} s" if x >= 0.01 else f"{x * 1000:.2f} ms"


def fmt_pct(x: Any, *, signed: bool = False) -> str:
    """A share as a percentage: whole percent, two decimals under 1 % (two significant digits under 0.01 %, so
    a cost is never "0.00%"), three decimals between 99.5 % and 100 % (never "100%" for less than all)."""
    if _missing(x):
        return MISSING
    x = float(x)
    a = abs(x)
    sign = "+" if signed else ""
    if 0 < a < 1e-4:
        return f"{100 * x:{sign}.2g}%"
    decimals = 3 if 0.995 <= a < 1 else (0 if a >= 0.01 or a == 0 else 2)
    return f"{100 * x:{sign}.{decimals}f}%"


def fmt_count(n: Any) -> str:
    """An exact count with thousands separators."""
    if _missing(n):
        return MISSING
    return f"{int(n):,}"


def fmt_compact(v: Any, unit: str = "") -> str:
    """Three significant digits with k/M/G/T (``12.3k``), ``unit`` appended."""
    if _missing(v):
        return MISSING
    v = float(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}{unit}"
    return f"{v:.3g}{unit}"


def fmt_number(v: Any) -> str:
    """A measure without a unit: integers exact with separators; floats whole from 100, two decimals from 1,
    three significant digits below."""
    if _missing(v):
        return MISSING
    if isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return f"{int(v):,}"
    v = float(v)
    if abs(v) < 1e-9:  # zero, or a denormal left by an old Darshan version
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"
