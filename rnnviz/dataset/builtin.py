"""The data sets that ship: nothing is downloaded (every install already has them).

* ``digits`` — scikit-learn's 8×8 handwritten digits (1,797 images, inside its wheel) as
  sequences: pixel by pixel (``order="pixels"``: T=64, I=1), row by row (``"rows"``:
  T=8, I=8) or pixels in a fixed random order (``"permuted"``: the permutation drawn from
  ``permutation_seed``) — the small cousins of sequential and permuted MNIST (Le, Jaitly
  & Hinton 2015). Classify the digit from the last output.
* ``text`` — characters of the Python documentation's topics (``pydoc_data.topics``,
  ``corpus="prose"``) or of standard-library source (``corpus="code"``: brackets and
  indentation make long-range dependencies, as in Karpathy 2015), in windows of
  ``seq_len`` characters, one-hot; predict the next character at every step.
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect

import numpy as np

from rnnviz.dataset.record import DataError, Dataset, split

DIGIT_ORDERS = ("pixels", "rows", "permuted")
TEXT_CORPORA = ("prose", "code")
#: The standard-library modules whose source makes the ``code`` corpus.
CODE_MODULES = ("textwrap", "string", "heapq", "bisect", "functools", "json.decoder", "json.encoder", "shlex")
#: Characters kept by frequency; rarer ones become :data:`UNKNOWN`.
MAX_VOCAB = 96
UNKNOWN = "\ufffd"
DIGITS_SOURCE = (
    "scikit-learn's copy of the UCI ML hand-written digits (Alpaydin & Kaynak 1998): 1,797 8×8 "
    "images, 16 grey levels, scaled to [0, 1]"
)
DIGITS_LICENCE = "CC BY 4.0 (UCI Machine Learning Repository); shipped in scikit-learn (BSD-3-Clause)"
TEXT_LICENCE = "Python Software Foundation License (the Python documentation and standard library)"


def _int_option(source: str, name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise DataError(source, f"{name}={value!r} is not allowed: an integer in [{lo}, {hi}]")
    return int(value)


def _choice(source: str, name: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise DataError(source, f"{name}={value!r} is not allowed: one of {', '.join(allowed)}")
    return str(value)


@functools.cache
def _digit_images() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # scikit-learn is heavy: imported when digits are asked for

    bunch = load_digits()
    return (bunch.data / 16.0).astype(np.float32), bunch.target.astype(np.int64)


def digits(order: str = "pixels", permutation_seed: int = 0) -> Dataset:
    """The 8×8 digits as sequences.

    Args:
        order: ``pixels`` (T=64, I=1), ``rows`` (T=8, I=8) or ``permuted`` (T=64, I=1, the
            pixels in a fixed random order).
        permutation_seed: the seed of the ``permuted`` order.

    Returns:
        A ``classification`` :class:`Dataset` with 10 classes and a fixed 80/20 split.
    """
    order = _choice("digits", "order", order, DIGIT_ORDERS)
    permutation_seed = _int_option("digits", "permutation_seed", permutation_seed, 0, 2**31 - 1)
    return _digits(order, permutation_seed)


@functools.lru_cache(maxsize=8)
def _digits(order: str, permutation_seed: int) -> Dataset:
    images, labels = _digit_images()
    n = images.shape[0]
    if order == "rows":
        inputs = images.reshape(n, 8, 8)
        names = tuple(f"column {c}" for c in range(8))
    else:
        inputs = images.reshape(n, 64, 1)
        if order == "permuted":
            inputs = inputs[:, np.random.default_rng(permutation_seed).permutation(64)]
        names = ("pixel",)
    train, test = split(n, 0.2, seed=0)
    return Dataset(
        name="digits",
        kind="classification",
        inputs=np.ascontiguousarray(inputs),
        mask=np.ones(inputs.shape[:2], bool),
        labels=labels,
        targets=None,
        n_classes=10,
        feature_names=names,
        vocab=None,
        train=train,
        test=test,
        source=DIGITS_SOURCE + f"; order {order}",
        licence=DIGITS_LICENCE,
        options=(("order", order), ("permutation_seed", permutation_seed)),
    )


@functools.cache
def corpus_text(corpus: str) -> str:
    """The characters of a corpus (cached: read once per process)."""
    if corpus == "prose":
        from pydoc_data.topics import topics

        return "\n\n".join(topics[k] for k in sorted(topics))
    parts = []
    for name in CODE_MODULES:
        try:
            parts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, TypeError) as err:  # an install without the standard library's sources
            raise DataError("text", f"corpus 'code' needs the source of {name} ({err})") from None
    return "\n\n".join(parts)


@functools.cache
def _encoded(corpus: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """The corpus as tokens, and the vocabulary: the :data:`MAX_VOCAB` most frequent
    characters (ties by code point) and :data:`UNKNOWN` for the rest."""
    text = corpus_text(corpus)
    counts = collections.Counter(text)
    kept = sorted(sorted(counts), key=lambda c: -counts[c])[:MAX_VOCAB]
    vocab = tuple(sorted(kept)) + ((UNKNOWN,) if len(counts) > len(kept) else ())
    index = {c: i for i, c in enumerate(vocab)}
    unknown = index.get(UNKNOWN, 0)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    table = np.full(max(map(ord, counts)) + 1, unknown, np.int64)
    for c, i in index.items():
        if c != UNKNOWN:
            table[ord(c)] = i
    return table[codes], vocab


def text(corpus: str = "prose", seq_len: int = 100, max_sequences: int = 1024) -> Dataset:
    """Characters in windows, one-hot, next-character prediction.

    Args:
        corpus: ``prose`` (the Python documentation's topics) or ``code`` (standard-library
            source).
        seq_len: T, characters per window (the target is the window shifted by one).
        max_sequences: at most this many windows, from the start of the corpus (one-hot
            inputs take ``4·T·V`` bytes each).

    Returns:
        A ``next-step`` :class:`Dataset`: inputs ``[N, T, V]`` one-hot, targets ``[N, T]``
        the next character's index, the vocabulary in ``vocab``; a fixed 90/10 split.
    """
    corpus = _choice("text", "corpus", corpus, TEXT_CORPORA)
    seq_len = _int_option("text", "seq_len", seq_len, 2, 10_000)
    max_sequences = _int_option("text", "max_sequences", max_sequences, 1, 100_000)
    return _text(corpus, seq_len, max_sequences)


@functools.lru_cache(maxsize=8)
def _text(corpus: str, seq_len: int, max_sequences: int) -> Dataset:
    tokens, vocab = _encoded(corpus)
    n = min(max_sequences, (tokens.size - 1) // seq_len)
    if n < 2:
        raise DataError("text", f"seq_len={seq_len} leaves fewer than two windows in the {corpus} corpus")
    starts = np.arange(n) * seq_len
    windows = tokens[starts[:, None] + np.arange(seq_len + 1)]  # [N, T+1]
    inputs = np.zeros((n, seq_len, len(vocab)), np.float32)
    inputs[np.arange(n)[:, None], np.arange(seq_len)[None, :], windows[:, :-1]] = 1.0  # one-hot
    train, test = split(n, 0.1, seed=0)
    return Dataset(
        name="text",
        kind="next-step",
        inputs=inputs,
        mask=np.ones((n, seq_len), bool),
        labels=None,
        targets=windows[:, 1:].astype(np.int64),
        n_classes=len(vocab),
        feature_names=tuple(repr(c) for c in vocab),
        vocab=vocab,
        train=train,
        test=test,
        source=(
            "the Python documentation's topics (pydoc_data.topics)"
            if corpus == "prose"
            else "standard-library source: " + ", ".join(CODE_MODULES)
        )
        + f"; {n} windows of {seq_len} characters",
        licence=TEXT_LICENCE,
        options=(("corpus", corpus), ("seq_len", seq_len), ("max_sequences", max_sequences)),
    )


#: The built-in data sets by name: a loader taking keyword options.
BUILTINS = {"digits": digits, "text": text}
