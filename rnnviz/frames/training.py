"""Training frames: loss and accuracy over steps (smoothed), the probe's gradient profile as a
matrix, and λ / the step-Jacobian spectrum over training.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.base.training import LayersOverTraining, OverTraining

SMOOTH_STEPS = 20


def training_frame(records, label: str | None = None) -> pd.DataFrame:
    """``run, step, loss, loss_smooth (trailing mean over SMOOTH_STEPS), metric, grad_norm,
    clipped`` for every step of every run (``run``: seed, or ``label``'s prefix + seed)."""
    parts = []
    for r in records:
        loss = pd.Series(r.losses)
        parts.append(
            pd.DataFrame(
                {
                    "run": f"{label + ' · ' if label else ''}seed {r.config.seed}"
                    + (f" lr {r.learning_rate:g}" if label is None else ""),
                    "step": np.arange(r.steps_run),
                    "loss": r.losses,
                    "loss_smooth": loss.rolling(SMOOTH_STEPS, min_periods=1).mean().to_numpy(),
                    "metric": r.metric,
                    "grad_norm": r.grad_norm,
                    "clipped": r.clipped,
                }
            )
        )
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["run", "step", "loss", "loss_smooth", "metric", "grad_norm", "clipped"])
    )


def profile_matrix(r) -> pd.DataFrame:
    """log₁₀ ‖∂L/∂carry_t‖ of one run: index the training step of each profile, columns t."""
    return pd.DataFrame(
        r.profiles,
        index=pd.Index(r.profile_steps, name="training step"),
        columns=pd.Index(np.arange(r.profiles.shape[1]), name="t"),
    )


def layers_over_training_frame(ot: LayersOverTraining) -> pd.DataFrame:
    """``step, series, value``: λ₁ of each recurrent layer (series ``λ₁ layer l``, 1-based) and
    the loss at every analysed kept step, as :func:`over_training_frame` writes them."""
    parts = [
        pd.DataFrame({"step": ot.steps, "series": f"λ₁ layer {layer + 1}", "value": ot.lambda1[:, i]})
        for i, layer in enumerate(ot.layers)
    ]
    parts.append(pd.DataFrame({"step": ot.steps, "series": "loss", "value": ot.loss}))
    return pd.concat(parts, ignore_index=True)


def over_training_frame(ot: OverTraining) -> pd.DataFrame:
    """``step, series, value``: λ1 … λk and the loss at every analysed kept step, and the
    median σ_i(J_t) over t (series ``σ1 (median)`` …)."""
    parts = [
        pd.DataFrame({"step": ot.steps, "series": f"λ{i + 1}", "value": ot.exponents[:, i]})
        for i in range(ot.exponents.shape[1])
    ]
    parts.append(pd.DataFrame({"step": ot.steps, "series": "loss", "value": ot.loss}))
    median = np.median(ot.singular_values, axis=1)
    parts += [
        pd.DataFrame({"step": ot.steps, "series": f"σ{i + 1} (median over t)", "value": median[:, i]})
        for i in range(median.shape[1])
    ]
    return pd.concat(parts, ignore_index=True)
