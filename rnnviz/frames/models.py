"""Your own model's analysis (:class:`~rnnviz.base.models.ModelAnalysis`) as tidy frames:
the gradient per layer and step, each recurrent state's, the connectivity over the tokens, and
its recurrent layers' step-Jacobian spectra (:class:`~rnnviz.base.models.ModelJacobians`),
states over the steps (:class:`~rnnviz.base.models.ModelStates`), what each way of computing
its gradients costs (:class:`~rnnviz.base.models.ModelStrategies`; on each device,
:class:`~rnnviz.base.models.ModelDevices`), and a reference block's
phase diagram over its memory knob (:class:`~rnnviz.base.models.BlockPhase`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rnnviz.base.connectivity import reach

if TYPE_CHECKING:
    from rnnviz.base.models import (
        BlockPhase,
        ModelAnalysis,
        ModelDevices,
        ModelJacobians,
        ModelLyapunov,
        ModelStates,
        ModelStrategies,
    )


def row_names(n_rows: int) -> list[str]:
    """The residual stream's rows: ``input`` (the embeddings, or a stack's inputs), then
    ``after block 1`` … ``after block L`` (row L: what the final norm reads)."""
    return ["input", *(f"after block {row}" for row in range(1, n_rows))]


def _labels(a: ModelAnalysis, steps: int) -> list[str]:
    """Each position's label: ``t: token`` where the tokens are known, else ``t``."""
    if a.tokens is None or len(a.tokens) != steps:
        return [str(t) for t in range(steps)]
    return [f"{t}: {tok}" for t, tok in enumerate(a.tokens)]


def layer_frame(a: ModelAnalysis) -> pd.DataFrame:
    """``row, layer, t, token, log10``: ‖∂L/∂x_t^{(l)}‖ for every row of the residual stream
    (``layer`` 0 … L) and position, log₁₀ (−inf: a true zero)."""
    n_rows, steps = a.log10_grad_norms.shape
    names, labels = row_names(n_rows), _labels(a, steps)
    return pd.DataFrame(
        {
            "row": np.repeat(names, steps),
            "layer": np.repeat(np.arange(n_rows), steps),
            "t": np.tile(np.arange(steps), n_rows),
            "token": np.tile(labels, n_rows),
            "log10": a.log10_grad_norms.reshape(-1),
        }
    )


def true_zeros(df: pd.DataFrame) -> str | None:
    """In words, where :func:`layer_frame`'s gradient is exactly 0 (``log10`` −inf), which the
    heatmap leaves blank: each such row and at how many positions; None where there is none.

    >>> df = pd.DataFrame({"row": ["input", "after block 1"], "log10": [-3.0, -np.inf]})
    >>> true_zeros(df).split(" (")[1]
    'after block 1 at 1 of 1 positions).'
    """
    zero = np.isneginf(df["log10"].to_numpy(np.float64))
    if not zero.any():
        return None
    steps = df.groupby("row", sort=False).size()
    counts = df[zero].groupby("row", sort=False).size()
    where = "; ".join(f"{row} at {n} of {steps[row]} positions" for row, n in counts.items())
    return (
        "Blank cells are gradients of exactly 0, not missing values: no path leads from there "
        f"to the loss ({where})."
    )


def designs_stream_frame(analyses: Sequence[ModelAnalysis], labels: Sequence[str]) -> pd.DataFrame:
    """:func:`layer_frame`'s input row of each analysis (‖∂L/∂x_t^{(0)}‖, what reaches the
    inputs), its ``row`` the design's label: one line per design on
    :func:`~rnnviz.charts.models.layer_lines`."""
    frames = [layer_frame(a).query("layer == 0").assign(row=label) for a, label in zip(analyses, labels)]
    return pd.concat(frames, ignore_index=True)


def designs_frame(
    analyses: Sequence[ModelAnalysis], labels: Sequence[str], n_params: Sequence[int]
) -> pd.DataFrame:
    """``design, parameters, loss, decades``: each design's parameter count, loss L, and by how
    many decades ‖∂L/∂x_t^{(0)}‖ falls from the last step to the first (log₁₀ at T − 1 minus
    log₁₀ at 0; inf where the first step's is a true zero)."""
    return pd.DataFrame(
        {
            "design": list(labels),
            "parameters": list(n_params),
            "loss": [a.loss for a in analyses],
            "decades": [float(a.log10_grad_norms[0, -1] - a.log10_grad_norms[0, 0]) for a in analyses],
        }
    )


def state_frame(a: ModelAnalysis) -> pd.DataFrame:
    """``layer, leaf, series, t, log10``: ‖∂L/∂state_t‖ of each recurrent layer's state leaves
    (``series``: ``layer 1 · h``, layers counted from 1)."""
    parts = []
    for layer, leaves in a.log10_state_grad_norms.items():
        for leaf, logs in leaves.items():
            parts.append(
                pd.DataFrame(
                    {
                        "layer": layer + 1,
                        "leaf": leaf,
                        "series": f"layer {layer + 1} · {leaf}",
                        "t": np.arange(len(logs)),
                        "log10": logs,
                    }
                )
            )
    if not parts:
        return pd.DataFrame(columns=["layer", "leaf", "series", "t", "log10"])
    return pd.concat(parts, ignore_index=True)


def token_connectivity_frame(a: ModelAnalysis) -> pd.DataFrame:
    """``t, token, log10``: how much the prediction at position p depends on each input
    (‖∂ℓ_p/∂x_t^{(0)}‖), up to p.

    Raises:
        ValueError: the analysis left the connectivity out (``connectivity=False``).
    """
    if a.log10_connectivity is None:
        raise ValueError("this analysis has no connectivity: run analyze_model with connectivity=True")
    steps = a.position + 1
    logs = np.asarray(a.log10_connectivity[:steps], np.float64)
    return pd.DataFrame(
        {"t": np.arange(steps), "token": _labels(a, len(a.connectivity))[:steps], "log10": logs}
    )


def layer_sigma_frame(j: ModelJacobians) -> pd.DataFrame:
    """``series, layer, t, log10``: log₁₀ σ₁(J_t^{(l)}), the most step t of recurrent layer l
    can stretch its state, at each step the spectra were taken (``series`` ``layer l``, 1-based).

    Example:
        >>> import types
        >>> j = types.SimpleNamespace(layers=(0, 2), steps=np.array([1, 5]),
        ...                           singular_values=np.array([[[1.0], [10.0]], [[0.1], [0.01]]]))
        >>> layer_sigma_frame(j).to_dict("list")["log10"]
        [0.0, 1.0, -1.0, -2.0]
    """
    sigma1 = np.asarray(j.singular_values, np.float64)[:, :, 0]
    with np.errstate(divide="ignore"):
        logs = np.log10(sigma1)
    steps = np.asarray(j.steps)
    return pd.DataFrame(
        {
            "series": np.repeat([f"layer {layer + 1}" for layer in j.layers], len(steps)),
            "layer": np.repeat(np.asarray(j.layers) + 1, len(steps)),
            "t": np.tile(steps, len(j.layers)),
            "log10": logs.reshape(-1),
        }
    )


#: The fractions of the strongest step a reach is counted at (:func:`layer_reach_frame`).
REACH_FRACTIONS = (0.1, 0.01)


def layer_reach_frame(a: ModelAnalysis, fractions: tuple[float, ...] = REACH_FRACTIONS) -> pd.DataFrame:
    """``row, fraction, reach``: for each row of the stream (the inputs, then after each block),
    how many steps back from the last the gradient ‖∂L/∂x_t^{(l)}‖ stays at least ``fraction`` of
    its largest over t (:func:`~rnnviz.base.connectivity.reach`, τ = T).

    Example:
        >>> import types
        >>> a = types.SimpleNamespace(log10_grad_norms=np.log10([[1e-3, 0.05, 1.0], [0.5, 0.2, 1.0]]))
        >>> layer_reach_frame(a).to_dict("list")["reach"]
        [0, 1, 2, 2]
    """
    logs = np.asarray(a.log10_grad_norms, np.float64)
    rows = row_names(logs.shape[0])
    return pd.DataFrame(
        [
            {"row": name, "fraction": f, "reach": reach(row, logs.shape[1], f)}
            for name, row in zip(rows, logs)
            for f in fractions
        ]
    )


def reach_sentence(a: ModelAnalysis, reaches: pd.DataFrame) -> str:
    """At the smallest fraction of :func:`layer_reach_frame`, how far back the inputs reach and
    the highest row whose gradient reaches any step before the last. A loss on the last step
    reads the rows above it at T − 1 alone (exact zeros before), so they reach 0 by
    construction: the sentence says so instead of comparing them.

    Example:
        >>> import types
        >>> logs = np.array([[-1.3, -0.3, 0.0], [-3.0, -0.7, 0.0], [-np.inf, -np.inf, 0.0]])
        >>> a = types.SimpleNamespace(log10_grad_norms=logs)
        >>> import re
        >>> for part in re.split("(?<=[.:]) ", reach_sentence(a, layer_reach_frame(a, fractions=(0.01,)))):
        ...     print(part)
        At 1 %, after block 1 reaches 1 step back and the inputs 2.
        Above it, after block 2 is read at the last step alone (the loss reads that step only):
        it reaches 0 steps back by construction.
    """
    fraction = reaches["fraction"].min()
    at = reaches[reaches["fraction"] == fraction].set_index("row")["reach"]
    logs = np.asarray(a.log10_grad_norms, np.float64)
    open_rows = [i for i, row in enumerate(logs) if np.isfinite(row[:-1]).any()] or [0]
    names = row_names(logs.shape[0])
    row = names[open_rows[-1]]
    steps = f"{at[row]} step{'' if at[row] == 1 else 's'} back"
    text = f"At {fraction * 100:g} %, " + (
        f"the inputs reach {steps}."
        if row == "input"
        else f"{row} reaches {steps} and the inputs {at['input']}."
    )
    closed = names[open_rows[-1] + 1 :]
    if closed:
        one = len(closed) == 1
        text += (
            f" Above it, {' and '.join(closed)} {'is' if one else 'are'} read at the last step alone (the "
            f"loss reads that step only): {'it reaches' if one else 'they reach'} 0 steps back by "
            "construction."
        )
    return text


def layer_lyapunov_frame(ly: ModelLyapunov) -> pd.DataFrame:
    """``series, layer, t, value``: each recurrent layer's running estimate of λ₁ (the mean of
    ln r_t from the warm-up to step t), for t after the warm-up.

    Example:
        >>> import types
        >>> ly = types.SimpleNamespace(layers=(1,), warmup=1, running=lambda: np.array([[-0.5, -0.25]]))
        >>> layer_lyapunov_frame(ly).to_dict("list")
        {'series': ['layer 2', 'layer 2'], 'layer': [2, 2], 't': [2, 3], 'value': [-0.5, -0.25]}
    """
    running = np.asarray(ly.running(), np.float64)
    steps = np.arange(ly.warmup + 1, ly.warmup + 1 + running.shape[1])
    return pd.DataFrame(
        {
            "series": np.repeat([f"layer {layer + 1}" for layer in ly.layers], len(steps)),
            "layer": np.repeat(np.asarray(ly.layers, int) + 1, len(steps)).tolist(),
            "t": np.tile(steps, len(ly.layers)).tolist(),
            "value": running.reshape(-1).tolist(),
        }
    )


def layer_state_frame(s: ModelStates) -> pd.DataFrame:
    """``layer, leaf, series, t, log10``: log₁₀ ‖state_t‖ of each recurrent layer's state
    leaves after every step (``layer`` 1-based, ``series`` ``layer l · leaf``; −inf: a zero state).

    Example:
        >>> import types
        >>> s = types.SimpleNamespace(layers=(0, 2), leaves=("c", "h"),
        ...                           norms=np.array([[[1.0, 10.0], [0.1, 0.1]], [[0.0, 1.0], [1.0, 1.0]]]))
        >>> f = layer_state_frame(s)
        >>> f["series"].unique().tolist(), f["log10"].tolist()[:4]
        (['layer 1 · c', 'layer 1 · h', 'layer 3 · c', 'layer 3 · h'], [0.0, 1.0, -1.0, -1.0])
    """
    norms = np.asarray(s.norms, np.float64)  # [R, P, T]
    n_layers, n_leaves, steps = norms.shape
    layers = np.asarray(s.layers, np.int64) + 1
    with np.errstate(divide="ignore"):
        logs = np.log10(norms)
    return pd.DataFrame(
        {
            "layer": np.repeat(layers, n_leaves * steps),
            "leaf": np.tile(np.repeat(np.asarray(s.leaves, dtype=object), steps), n_layers),
            "series": np.repeat([f"layer {layer} · {leaf}" for layer in layers for leaf in s.leaves], steps),
            "t": np.tile(np.arange(steps), n_layers * n_leaves),
            "log10": logs.reshape(-1),
        },
        columns=["layer", "leaf", "series", "t", "log10"],
    )


def layer_units_frame(s: ModelStates, leaf: str) -> pd.DataFrame:
    """``layer, leaf, unit, series, t, value``: the first numbers of one state leaf (``unit``:
    the index into the flattened leaf) of each recurrent layer after every step.

    Example:
        >>> import types
        >>> units = (np.array([[[1.0, 2.0], [3.0, 4.0]]]),)  # one leaf: [R = 1, k = 2, T = 2]
        >>> s = types.SimpleNamespace(layers=(1,), leaves=("h",), units=units)
        >>> layer_units_frame(s, "h").to_dict("list")["series"]
        ['layer 2 · h[0]', 'layer 2 · h[0]', 'layer 2 · h[1]', 'layer 2 · h[1]']
    """
    values = np.asarray(s.units[s.leaves.index(leaf)], np.float64)  # [R, k, T]
    n_layers, k, steps = values.shape
    layers = np.asarray(s.layers, np.int64) + 1
    return pd.DataFrame(
        {
            "layer": np.repeat(layers, k * steps),
            "leaf": leaf,
            "unit": np.tile(np.repeat(np.arange(k), steps), n_layers),
            "series": np.repeat(
                [f"layer {layer} · {leaf}[{i}]" for layer in layers for i in range(k)], steps
            ),
            "t": np.tile(np.arange(steps), n_layers * k),
            "value": values.reshape(-1),
        },
        columns=["layer", "leaf", "unit", "series", "t", "value"],
    )


#: Below this relative difference two float32 results are equal up to rounding.
ROUNDING = 1e-4


def way_frame(s: ModelStrategies) -> pd.DataFrame:
    """``way, description, compile_s, run_ms, run_min_ms, run_max_ms, repeats, ratio, loss,
    loss_rel_diff, max_rel_diff, agrees``: a row per way of computing the gradients, in the
    record's order. ``loss_rel_diff`` is its loss's relative difference from plain ``jax.grad``'s,
    ``max_rel_diff`` its per-step norms' from the one-reverse-pass analysis's (NaN for plain),
    ``agrees`` whether both are within float32 rounding (:data:`ROUNDING`).

    Example:
        >>> import types
        >>> way = lambda name, run_s, loss, diff: types.SimpleNamespace(
        ...     name=name, description="", compile_s=1.0, run_s=run_s, run_min_s=run_s,
        ...     run_max_s=run_s, repeats=3, ratio=run_s / 0.002, loss=loss, max_rel_diff=diff)
        >>> s = types.SimpleNamespace(ways=(way("plain", 0.002, 2.0, None), way("shared", 0.003, 2.0, 0.0),
        ...                                 way("two", 0.004, 2.0, 0.01)))
        >>> f = way_frame(s)
        >>> f["run_ms"].tolist(), f["ratio"].tolist(), f["agrees"].tolist()
        ([2.0, 3.0, 4.0], [1.0, 1.5, 2.0], [True, True, False])
    """
    rows = [
        {
            "way": w.name,
            "description": w.description,
            "compile_s": w.compile_s,
            "run_ms": w.run_s * 1e3,
            "run_min_ms": w.run_min_s * 1e3,
            "run_max_ms": w.run_max_s * 1e3,
            "repeats": w.repeats,
            "ratio": w.ratio,
            "loss": w.loss,
            "max_rel_diff": np.nan if w.max_rel_diff is None else w.max_rel_diff,
        }
        for w in s.ways
    ]
    df = pd.DataFrame(rows)
    base = df["loss"].iloc[0]  # plain jax.grad's, the first way
    df["loss_rel_diff"] = (df["loss"] - base).abs() / max(abs(base), np.finfo(np.float64).tiny)
    df["agrees"] = (df["loss_rel_diff"] <= ROUNDING) & ~(df["max_rel_diff"] > ROUNDING)
    return df


def device_way_frame(d: ModelDevices) -> pd.DataFrame:
    """``device, device_kind, device_name,`` then :func:`way_frame`'s columns, then
    ``speedup, loss_vs_first``: a row per device × way, in the record's order. ``ratio`` is
    to plain ``jax.grad`` on the same device; ``speedup`` is the first device's median run of
    the same way over this one's (above 1: faster here); ``loss_vs_first`` the loss's relative
    difference from the first device's plain ``jax.grad``, which ``agrees`` also bounds.

    Example:
        >>> import types
        >>> way = lambda name, run_s: types.SimpleNamespace(
        ...     name=name, description="", compile_s=1.0, run_s=run_s, run_min_s=run_s,
        ...     run_max_s=run_s, repeats=3, ratio=run_s / 0.002, loss=2.0, max_rel_diff=None)
        >>> run = lambda device, scale: types.SimpleNamespace(
        ...     device=device, ways=(way("plain", 0.002 * scale), way("shared", 0.004 * scale)))
        >>> f = device_way_frame(types.SimpleNamespace(runs=(run("cpu:0 cpu", 1), run("gpu:0 H100", 0.25))))
        >>> f[["device_kind", "device_name", "way"]].values.tolist()  # doctest: +NORMALIZE_WHITESPACE
        [['cpu', 'cpu', 'plain'], ['cpu', 'cpu', 'shared'],
         ['gpu', 'H100', 'plain'], ['gpu', 'H100', 'shared']]
        >>> f["speedup"].tolist(), f["agrees"].tolist()
        ([1.0, 1.0, 4.0, 4.0], [True, True, True, True])
    """
    frames = [way_frame(r).assign(device=r.device) for r in d.runs]
    df = pd.concat(frames, ignore_index=True)
    kind, _, rest = (df["device"].str.partition(":")[i] for i in range(3))  # "gpu", ":", "0 NVIDIA H100"
    df.insert(0, "device_name", rest.str.partition(" ")[2])
    df.insert(0, "device_kind", kind)
    df.insert(0, "device", df.pop("device"))
    first = frames[0].set_index("way")
    df["speedup"] = df["way"].map(first["run_ms"]) / df["run_ms"]
    base = first["loss"].iloc[0]
    df["loss_vs_first"] = (df["loss"] - base).abs() / max(abs(base), np.finfo(np.float64).tiny)
    df["agrees"] &= df["loss_vs_first"] <= ROUNDING
    return df


def block_phase_frame(p: BlockPhase) -> pd.DataFrame:
    """``value, seed, row, t, lag, log10_grad_norm``: log₁₀ ‖∂L/∂x_t^{(l)}‖ at every knob value,
    seed, row of the stream (:func:`row_names`: ``input`` the inputs) and step t, lag T − 1 − t.

    Example:
        >>> import types
        >>> p = types.SimpleNamespace(values=np.array([0.5, 1.0]), seeds=(0,),
        ...                           log10_grad_norms=np.zeros((2, 1, 2, 3)))
        >>> f = block_phase_frame(p)
        >>> len(f), f["row"].unique().tolist(), f["lag"].tolist()[:3]
        (12, ['input', 'after block 1'], [2, 1, 0])
    """
    logs = np.asarray(p.log10_grad_norms, np.float64)  # [V, S, L + 1, T]
    n_values, n_seeds, n_rows, steps = logs.shape
    index = pd.MultiIndex.from_product(
        [np.asarray(p.values, np.float64), list(p.seeds), row_names(n_rows), range(steps)],
        names=["value", "seed", "row", "t"],
    )
    df = pd.DataFrame({"log10_grad_norm": logs.reshape(-1)}, index=index).reset_index()
    df.insert(4, "lag", steps - 1 - df["t"])
    return df


def block_phase_matrix(df: pd.DataFrame) -> pd.DataFrame:
    """The phase diagram of the inputs' row of :func:`block_phase_frame`: index ``lag``, columns
    the knob's values, values the seed-mean of log₁₀(‖∂L/∂x_{T−1−lag}‖ / ‖∂L/∂x_{T−1}‖), as the
    bare cell's phase diagram reads its carry (:func:`~rnnviz.frames.dynamics.phase_frames`;
    NaN where a norm is 0).

    Example:
        >>> import types
        >>> logs = np.array([[[[-3.0, -1.0]]], [[[-1.0, -1.0]]]])  # [V = 2, S = 1, 1, T = 2]
        >>> p = types.SimpleNamespace(values=np.array([0.5, 1.0]), seeds=(0,), log10_grad_norms=logs)
        >>> block_phase_matrix(block_phase_frame(p)).to_dict()
        {0.5: {0: 0.0, 1: -2.0}, 1.0: {0: 0.0, 1: 0.0}}
    """
    rows = df[df["row"] == "input"]
    logs = rows.pivot_table(index="lag", columns=["value", "seed"], values="log10_grad_norm", dropna=False)
    with np.errstate(invalid="ignore"):
        ratio = logs - logs.loc[0]  # each (value, seed)'s own last step
    ratio = ratio.where(np.isfinite(ratio))
    return ratio.T.groupby(level="value").mean().T.sort_index()


def block_phase_reach(matrix: pd.DataFrame, floor: float = -2.0) -> pd.DataFrame:
    """``value, lag``: for each knob value of :func:`block_phase_matrix`, the furthest lag at
    which at least 10^floor (1 %) of the gradient reaching the last input still arrives (lag 0
    always does; a NaN, a norm of 0, arrives nowhere).

    Example:
        >>> m = pd.DataFrame({0.5: [0.0, -1.0, -3.0, -2.5], 1.0: [0.0, -0.5, -1.0, -1.5]})
        >>> block_phase_reach(m).to_dict("list")
        {'value': [0.5, 1.0], 'lag': [1, 3]}
    """
    arrives = matrix.to_numpy(np.float64) >= floor
    lags = matrix.index.to_numpy()
    furthest = [int(lags[a].max()) if a.any() else 0 for a in arrives.T]
    return pd.DataFrame({"value": matrix.columns.to_numpy(), "lag": furthest})


def phase_reach_sentence(reach: pd.DataFrame, symbol: str, last_lag: int) -> str:
    """What :func:`block_phase_reach`'s line says, in words: a line along one edge of the
    diagram (lag 0 at every value, or the last lag at every value) reads as a frame, not as
    data.

    Args:
        reach: :func:`block_phase_reach` of the diagram.
        symbol: the knob's symbol ("s", "fb").
        last_lag: the diagram's largest lag, T − 1.

    Example:
        >>> r = pd.DataFrame({"value": [0.1, 1.0, 10.0], "lag": [0, 0, 0]})
        >>> phase_reach_sentence(r, "s", 49)
        'At every s here, less than 1 % of it arrives even one step back.'
        >>> phase_reach_sentence(r.assign(lag=[49, 49, 49]), "s", 49)
        'At every s here, at least 1 % of it arrives all 49 steps back.'
        >>> phase_reach_sentence(r.assign(lag=[30, 12, 0]), "s", 49)
        'At least 1 % of it arrives 30 steps back at s = 0.1, and 0 at s = 10.'
    """
    lags = reach["lag"].to_numpy()
    if (lags == 0).all():
        return f"At every {symbol} here, less than 1 % of it arrives even one step back."
    if (lags == last_lag).all():
        return f"At every {symbol} here, at least 1 % of it arrives all {last_lag} steps back."
    far, near = reach.iloc[int(lags.argmax())], reach.iloc[int(lags.argmin())]
    return (
        f"At least 1 % of it arrives {int(far['lag'])} steps back at {symbol} = {far['value']:g}, "
        f"and {int(near['lag'])} at {symbol} = {near['value']:g}."
    )
