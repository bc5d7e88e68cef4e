"""The fields of one ``config.json``, each read with the family's default where it is absent
and checked against what it allows; every refusal is one :class:`CheckpointError` naming the
field, its value and what is allowed.

>>> f = Fields({"hidden_size": 0, "eps": None}, "config.json", {"hidden_size": 768, "eps": 1e-5})
>>> f.positive_int("hidden_size")
Traceback (most recent call last):
    ...
rnnviz.checkpoints.record.CheckpointError: config.json: hidden_size is 0; allowed: a positive integer.
>>> Fields({}, "config.json", {"eps": 1e-5}).number("eps")
1e-05
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rnnviz.checkpoints.record import CheckpointError

#: What ``default`` is when a call gives none: the family's own default applies.
_FAMILY = object()


class Fields(NamedTuple):
    """A ``config.json`` mapping read field by field.

    Attributes:
        config: the mapping.
        source: the file, for messages.
        defaults: the family's default of each field (transformers' config class's).
        null_is_default: a null field takes its default too (transformers' "derive it").
    """

    config: Mapping[str, Any]
    source: str
    defaults: Mapping[str, Any]
    null_is_default: bool = False

    def get(self, name: str, default: Any = _FAMILY) -> Any:
        """The field's value, or ``default`` (the family's, unless given) where it is absent."""
        default = self.defaults.get(name) if default is _FAMILY else default
        found = self.config.get(name, default)
        return default if found is None and self.null_is_default else found

    def refuse(self, name: str, found: Any, allowed: str) -> CheckpointError:
        """The error for field ``name`` holding ``found``, where ``allowed`` is."""
        return CheckpointError(self.source, f"{name} is {found!r}; allowed: {allowed}")

    def positive_int(self, name: str, default: Any = _FAMILY) -> int:
        """A size: an integer ≥ 1 (a bool is an int to Python, never a size)."""
        found = self.get(name, default)
        if isinstance(found, bool) or not isinstance(found, int) or found < 1:
            raise self.refuse(name, found, "a positive integer")
        return found

    def number(self, name: str, default: Any = _FAMILY, *, zero: bool = False, optional: bool = False) -> Any:
        """A positive number as float (≥ 0 with ``zero``; null, returned as None, with ``optional``)."""
        found = self.get(name, default)
        if found is None and optional:
            return None
        real = isinstance(found, int | float) and not isinstance(found, bool)
        if not real or found < 0 or (found == 0 and not zero):
            allowed = ("a number ≥ 0" if zero else "a positive number") + (" or null" if optional else "")
            raise self.refuse(name, found, allowed)
        return float(found)

    def row(self, name: str, rows: int, default: Any = _FAMILY) -> int | None:
        """An index into ``rows`` rows (a ``pad_token_id``), or None where the field is null."""
        found = self.get(name, default)
        if found is None:
            return None
        if isinstance(found, bool) or not isinstance(found, int) or not 0 <= found < rows:
            raise self.refuse(name, found, f"null or an integer in 0 … {rows - 1}")
        return found

    def flag(self, name: str, default: Any = _FAMILY) -> bool:
        """A JSON boolean."""
        found = self.get(name, default)
        if not isinstance(found, bool):
            raise self.refuse(name, found, "true or false")
        return found
