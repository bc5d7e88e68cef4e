"""How much a data file may hold: :class:`Budget`, checked against what a file claims (its
headers, its metadata, its running row count) before its data are allocated."""

from __future__ import annotations

from typing import NamedTuple, NoReturn

from rnnviz.config import MAX_INPUT, MAX_SEQ_LEN
from rnnviz.dataset.record import DataError


class Budget(NamedTuple):
    """The most a data file may hold (:mod:`~rnnviz.dataset.files` builds one at each load
    from its module constants, so lowering them lowers it).

    Attributes:
        data_bytes: the largest inputs ``[N, T, I]``, in bytes as float32.
        sequences: the most sequences N.
        why: where a limit lower than the loaders' own comes from, for the message (the
            dashboard's workers: a quarter of their memory cap); empty for the loaders' own.
    """

    data_bytes: int
    sequences: int
    why: str = ""

    def check(self, name: str, n: int, t: int, i: int, claim: str = "") -> None:
        """Refuse ``n`` sequences of ``t`` steps of ``i`` features unless each is in range and
        their float32 bytes fit :attr:`data_bytes`.

        Args:
            name: the file's name, for the message.
            n, t, i: N, T and I, as claimed (a header) or counted (a table).
            claim: where the numbers come from, for the message (``its header claims …``).

        Raises:
            DataError: naming the file, the number out of range and what is allowed.
        """
        if not 1 <= n <= self.sequences:
            raise DataError(name, f"{n} sequences; allowed: 1 to {self.sequences}")
        if not 1 <= t <= MAX_SEQ_LEN:
            raise DataError(name, f"sequences of {t} steps; allowed: 1 to {MAX_SEQ_LEN}")
        if not 1 <= i <= MAX_INPUT:
            raise DataError(name, f"{i} features per step; allowed: 1 to {MAX_INPUT}")
        if 4 * n * t * i > self.data_bytes:
            self.refuse(name, 4 * n * t * i, claim)

    def refuse(self, name: str, nbytes: int, claim: str = "") -> NoReturn:
        """Refuse ``nbytes`` of data over :attr:`data_bytes`.

        Raises:
            DataError: ``name: 5.7 GiB as float32, over the 1 GiB limit (claim).``, then
                ``; the limit is`` :attr:`why` where there is one.
        """
        where = f" ({claim})" if claim else ""
        amount = f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else size_text(nbytes)
        why = f"; the limit is {self.why}" if self.why else ""
        raise DataError(name, f"{amount} as float32, over the {size_text(self.data_bytes)} limit{where}{why}")


def size_text(nbytes: int) -> str:
    """A byte count in words: ``1 GiB``, ``64 MiB``, ``100 bytes``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"
