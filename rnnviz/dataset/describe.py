"""A data set in words and one sequence drawn as text: what ``rnnviz data`` prints (NumPy only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnviz.dataset.record import Dataset

#: Grey levels from light to dark, for drawing an image in text.
SHADES = " .:-=+*#%@"


def summary(ds: Dataset) -> dict[str, Any]:
    """The facts of a data set, JSON-ready.

    Returns:
        ``name, kind, sequences, seq_len, input_size, classes, lengths`` (min, max),
        ``train, test`` (sizes), ``source, licence, options``.
    """
    lengths = ds.lengths
    return {
        "name": ds.name,
        "kind": ds.kind,
        "sequences": ds.n_sequences,
        "seq_len": ds.seq_len,
        "input_size": ds.input_size,
        "classes": ds.n_classes,
        "lengths": [int(lengths.min()), int(lengths.max())],
        "train": int(ds.train.size),
        "test": int(ds.test.size),
        "source": ds.source,
        "licence": ds.licence,
        "options": {k: v for k, v in ds.options},
    }


def describe(ds: Dataset) -> str:
    """Two lines: the shape and task, then the source and licence."""
    s = summary(ds)
    features = f"{s['input_size']} feature" + ("s" if s["input_size"] != 1 else "")
    what = f"{s['sequences']} sequences × {s['seq_len']} steps × {features}"
    if ds.ragged:
        what += f" (ragged: {s['lengths'][0]}–{s['lengths'][1]} steps, padded with a mask)"
    task = {
        "classification": f"classify into {s['classes']} classes from the last output",
        "next-step": f"predict the next of {s['classes']} tokens at every step",
        "regression": f"predict {ds.targets.shape[-1] if ds.targets is not None else 0} number(s) per step",
        "unlabelled": "no targets (the configuration's loss applies)",
    }[ds.kind]
    return (
        f"{s['name']}: {what}; {task}; split {s['train']} train / {s['test']} test\n"
        f"source: {s['source']}; licence: {s['licence']}"
    )


def preview(ds: Dataset, index: int = 0) -> str:
    """Sequence ``index`` drawn as text: a digit as an 8×8 image in grey characters, a text
    window as its characters, other data as its first steps' numbers."""
    if not 0 <= index < ds.n_sequences:
        raise IndexError(f"index {index} is not in [0, {ds.n_sequences - 1}]")
    x = np.asarray(ds.inputs[index][ds.mask[index]], np.float64)  # [length, I]
    label = f" (label {int(ds.labels[index])})" if ds.labels is not None else ""
    if ds.name == "digits":
        image = _digit_image(ds, x)
        rows = ["".join(SHADES[min(len(SHADES) - 1, int(v * len(SHADES)))] * 2 for v in row) for row in image]
        return f"sequence {index}{label}:\n" + "\n".join(rows)
    if ds.vocab is not None:
        return f"sequence {index}: " + repr("".join(ds.vocab[i] for i in x.argmax(axis=1)))
    steps = "\n".join("  " + " ".join(f"{v:+.3g}" for v in row[:8]) for row in x[:5])
    return f"sequence {index}{label}, first steps (≤ 8 features):\n{steps}"


def _digit_image(ds: Dataset, x: np.ndarray) -> np.ndarray:
    """The 8×8 image of a digits sequence in any of its orders."""
    order = dict(ds.options).get("order", "pixels")
    flat = x.reshape(-1)
    if order == "permuted":
        perm = np.random.default_rng(int(dict(ds.options)["permutation_seed"])).permutation(64)
        image = np.empty(64)
        image[perm] = flat
        flat = image
    return flat.reshape(8, 8)


def digit_steps(ds: Dataset) -> np.ndarray | None:
    """``[8, 8]`` the step t (0-based) at which each pixel of a digit enters the sequence, in
    the data's order (pixels, rows, permuted); None for other data. Per-step values (e.g.
    the connectivity of each input) are drawn on the image as ``values[digit_steps(ds)]``."""
    if ds.name != "digits":
        return None
    order = dict(ds.options).get("order", "pixels")
    if order == "rows":
        return np.repeat(np.arange(8)[:, None], 8, axis=1)
    steps = np.arange(64)
    if order == "permuted":
        perm = np.random.default_rng(int(dict(ds.options)["permutation_seed"])).permutation(64)
        steps = np.empty(64, int)
        steps[perm] = np.arange(64)
    return steps.reshape(8, 8)


@dataclass(frozen=True)
class Preview:
    """One sequence of a data set, ready to draw (what the dashboard's data panel shows).

    Attributes:
        label: the data set's label (``digits rows``, a file's name).
        description: :func:`describe`'s two lines.
        index: which sequence.
        title: what the sequence is (``digit 3``, ``characters 0–99``, ``sequence 0``).
        image: ``[8, 8]`` the digit in pixel order (digits), else None.
        text: the window's characters (a text), else None.
        series: ``[length, I]`` the real steps (other data), else None.
        feature_names: ``[I]``.
        kind, seq_len, input_size, n_sequences: the data set's.
    """

    label: str
    description: str
    index: int
    title: str
    image: np.ndarray | None
    text: str | None
    series: np.ndarray | None
    feature_names: tuple[str, ...]
    kind: str
    seq_len: int
    input_size: int
    n_sequences: int


def preview_record(ds: Dataset, index: int = 0) -> Preview:
    """Sequence ``index`` of ``ds`` as a :class:`Preview`: the digit image, the text, or the
    series of its real steps."""
    if not 0 <= index < ds.n_sequences:
        raise IndexError(f"index {index} is not in [0, {ds.n_sequences - 1}]")
    x = np.asarray(ds.inputs[index][ds.mask[index]], np.float64)
    label = f" (label {int(ds.labels[index])})" if ds.labels is not None else ""
    image = text = series = None
    if ds.name == "digits":
        image, title = _digit_image(ds, x), f"sequence {index}: a {int(ds.labels[index])}"
    elif ds.vocab is not None:
        text, title = "".join(ds.vocab[i] for i in x.argmax(axis=1)), f"sequence {index}: {len(x)} characters"
    else:
        series, title = x, f"sequence {index}{label}: {len(x)} steps"
    return Preview(
        ds.label,
        describe(ds),
        index,
        title,
        image,
        text,
        series,
        ds.feature_names,
        ds.kind,
        ds.seq_len,
        ds.input_size,
        ds.n_sequences,
    )
