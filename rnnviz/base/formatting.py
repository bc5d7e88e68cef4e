"""Number formatting shared by the core, the charts and the CLI (pure Python: no JAX)."""

from __future__ import annotations

import math
from typing import Any

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(n: int) -> str:
    """``-228`` → ``⁻²²⁸``."""
    return str(n).translate(_SUPERSCRIPT)


def layers_text(n: int) -> str:
    """A count of layers in words.

    Example:
        >>> layers_text(1), layers_text(4)
        ('1 layer', '4 layers')
    """
    return f"{n} layer" if n == 1 else f"{n} layers"


def pow10_text(log10_value: float, digits: int = 3) -> str:
    """A magnitude given by its log₁₀ as ``3.47×10⁻²²⁸``: ``0`` for −inf, ``nan``/``inf``
    as such. Works far outside float64's range (the mantissa is computed from the log)."""
    if math.isnan(log10_value):
        return "nan"
    if log10_value == -math.inf:
        return "0"
    if log10_value == math.inf:
        return "inf"
    e = math.floor(log10_value)
    m = 10 ** (log10_value - e)
    if round(m, digits - 1) >= 10:
        m, e = m / 10, e + 1
    return f"{m:.{digits - 1}f}×10{superscript(e)}"


def finite_json(x: Any) -> Any:
    """JSON has no NaN/Inf: non-finite numbers become null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_json(v) for v in x]
    return x
