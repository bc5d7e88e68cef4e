"""The :class:`Dataset` record every source loads into, :class:`DataError`, and :func:`reason`
(an exception in the few words a message quotes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnnviz.config import ConfigError

#: What a data set asks of the network: ``classification`` (one label per sequence, read
#: from the last output), ``next-step`` (the next token at every step: text),
#: ``regression`` (a target vector at every step) or nothing (``unlabelled``: inputs only).
KINDS = ("classification", "next-step", "regression", "unlabelled")


class DataError(ConfigError):
    """A data source cannot be used; ``str(err)`` names the source and what is wrong.

    Attributes:
        field: ``"data"``.
        value: the source (a built-in's name or a file name).
        allowed: what is wrong and what is allowed.
    """

    def __init__(self, source: str, problem: str):
        super().__init__("data", source, problem)

    def __str__(self) -> str:
        return f"{self.value}: {self.allowed}."

    def __reduce__(self):
        return type(self), (self.value, self.allowed)


@dataclass(frozen=True, eq=False)
class Dataset:
    """Sequences to analyse or train on, with what the network should predict.

    N sequences of T steps of I features, float32, padded at the end where they are
    shorter than T (``mask`` says which steps are real).

    Attributes:
        name: how it is called (``digits``, ``text``, or the file's name).
        kind: one of :data:`KINDS`.
        inputs: ``[N, T, I]`` float32.
        mask: ``[N, T]`` bool, True for real steps (padding is False).
        labels: ``[N]`` int64 class of each sequence (``classification``), else None.
        targets: ``[N, T]`` int64 next tokens (``next-step``) or ``[N, T, O]`` float32
            (``regression``), else None.
        n_classes: classes or vocabulary size (``classification``, ``next-step``), else None.
        feature_names: ``[I]`` a name per input feature.
        vocab: the characters of a ``next-step`` text, index = token, else None.
        train, test: int64 indices into the N sequences: a fixed split.
        source: where it comes from, in words.
        licence: under what terms.
        options: how it was loaded (``order``, ``seq_len``, …), for the record.
    """

    name: str
    kind: str
    inputs: np.ndarray
    mask: np.ndarray
    labels: np.ndarray | None
    targets: np.ndarray | None
    n_classes: int | None
    feature_names: tuple[str, ...]
    vocab: tuple[str, ...] | None
    train: np.ndarray
    test: np.ndarray
    source: str
    licence: str
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        n, t, i = self.inputs.shape
        if self.kind not in KINDS:
            raise ValueError(f"Dataset.kind must be one of {KINDS}")
        if self.mask.shape != (n, t) or len(self.feature_names) != i:
            raise ValueError("Dataset: mask must be [N, T] and feature_names [I]")
        if (self.kind == "classification") != (self.labels is not None):
            raise ValueError("Dataset: labels go with kind 'classification', and only with it")
        for a in (self.inputs, self.mask, self.labels, self.targets, self.train, self.test):
            if a is not None:
                a.setflags(write=False)  # loaders cache their data sets: shared, so read-only

    @property
    def label(self) -> str:
        """A short name with the options that shape it: ``digits pixels``, ``text prose
        T=100``, or the file's name."""
        options = dict(self.options)
        if self.name == "digits":
            return f"digits {options['order']}"
        if self.name == "text":
            return f"text {options['corpus']} T={options['seq_len']}"
        return self.name

    @property
    def n_sequences(self) -> int:
        """N."""
        return int(self.inputs.shape[0])

    @property
    def seq_len(self) -> int:
        """T, the padded length."""
        return int(self.inputs.shape[1])

    @property
    def input_size(self) -> int:
        """I."""
        return int(self.inputs.shape[2])

    @property
    def lengths(self) -> np.ndarray:
        """``[N]`` the real length of each sequence."""
        return self.mask.sum(axis=1)

    @property
    def ragged(self) -> bool:
        """Whether any sequence is shorter than T."""
        return bool((~self.mask).any())


def split(n: int, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed train/test split of ``n`` sequences: a permutation from ``seed``, the last
    ``test_fraction`` of it held out (at least one each side when ``n`` ≥ 2).

    Returns:
        ``(train, test)`` sorted int64 indices.
    """
    order = np.random.default_rng(seed).permutation(n)
    n_test = min(max(1, round(test_fraction * n)), n - 1) if n >= 2 else 0
    return np.sort(order[: n - n_test]).astype(np.int64), np.sort(order[n - n_test :]).astype(np.int64)


def reason(err: BaseException) -> str:
    """An exception in a few words for a :class:`DataError` message: its type and the first
    line of its text (``BadZipFile: File is not a zip file``)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
