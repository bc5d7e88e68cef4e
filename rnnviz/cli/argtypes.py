"""argparse ``type`` functions shared by the command line (:mod:`rnnviz.cli.main`) and the app
launcher (:mod:`rnnviz.cli.launch`): each turns one string into a value or says, in one line,
what was wrong with it."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def bounded_int(lo: int, hi: int, what: str = "an integer") -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[lo, hi]``, with a one-line message otherwise.

    Args:
        lo, hi: the allowed range, both ends included.
        what: how the message names the value (``"a port number"``).

    Returns:
        A function ``str -> int`` raising ``argparse.ArgumentTypeError``.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} in [{lo}, {hi}]") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is not in [{lo}, {hi}]")
        return value

    return parse


def finite_nonnegative(text: str) -> float:
    """An argparse ``type``: a finite number ≥ 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number ≥ 0")
    return value


def parameter_count(text: str) -> int:
    """An argparse ``type``: a parameter count, ``100k``, ``1.5M`` or an integer."""
    from rnnviz.config import ConfigError
    from rnnviz.studies.sizing import target_count  # no JAX: the checkpoint families' shapes

    try:
        return target_count(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count ≥ 1 (100k, 1.5M or an integer)") from None


def int_list(text: str) -> tuple[int, ...]:
    """An argparse ``type``: depths, comma-separated integers from 1 to 32 (``2,4``)."""
    parse = bounded_int(1, 32, "a depth")
    items = tuple(parse(t.strip()) for t in text.split(",") if t.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names no depth (e.g. 2,4)")
    return items


def count_list(text: str) -> tuple[str, ...]:
    """An argparse ``type``: parameter counts, comma-separated (``100k,400k``), each as
    :func:`parameter_count` reads it."""
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    for item in items:
        parameter_count(item)
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names no count (e.g. 100k,400k)")
    return items
