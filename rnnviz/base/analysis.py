"""The :class:`Analysis` record: what :func:`rnnviz.analyze` returns, in NumPy arrays and
plain values (no JAX), so that a process that only reads and draws analyses (the
dashboard's server) never imports JAX."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnviz.base.formatting import finite_json
from rnnviz.base.timing import Timing
from rnnviz.config import RunConfig


@dataclass(frozen=True, eq=False)
class Analysis:
    """How the gradient of the loss flows back through time for one :class:`RunConfig`.

    All arrays are NumPy. T = seq_len, B = batch (1 when unbatched), H = hidden size,
    C = carry components (LSTM ``c, h``), I = input size. Index 0 of a ``[T+1]`` series is
    the initial carry, index t the carry after x_t.

    Attributes:
        config: the configuration analysed.
        loss: L, the configured loss (``RunConfig.loss``).
        grad_norms: ``[T+1]`` ‖∂L/∂carry_t‖ over batch, units and components, as float32
            holds it (0 where the exact value is below float32's range).
        component_grad_norms: ``{component: [T+1]}`` the same per carry component.
        example_grad_norms: ``[T+1, B]`` the same per example.
        input_grad_norms: ``[T]`` ‖∂L/∂x_t‖.
        carries: ``{component: [T+1, (B,) H]}`` the trajectory.
        carry_norms: ``[T+1]`` ‖carry_t‖; component_carry_norms the same per component.
        params: the Flax params tree (gain and forget bias applied).
        param_grads: ∂L/∂params, the same tree.
        learned_carry_grad: ``{component: [H]}`` for ``carry_init="learned"``, else None.
        param_grad_by_step: ``[T, G]`` each step's contribution to ∂L/∂W per group
            (``param_groups``), for strategies that yield it (``per_step``, ``fused``).
        param_groups: the G group names (``recurrent``, ``input``, ``bias``).
        inputs: ``[(B,) T, I]`` the exact input.
        final_carry: ``{component: [(B,) H]}`` carry_T.
        log10_grad_norms: ``[T+1]`` log₁₀ ‖∂L/∂carry_t‖, exact even where float32 cannot
            hold the gradient (float64; −inf only for a true zero, i.e. no dependence).
        log10_component_grad_norms: ``{component: [T+1]}`` the same per component.
        log10_example_grad_norms: ``[T+1, B]`` the same per example.
        log10_source: ``"float32"`` (the float32 norms were in range and exact) or
            ``"log pass"`` (:mod:`rnnviz.engine.logpass` computed them).
        nonfinite_carry_step: the first t (forward in time) whose carry holds NaN/Inf, or None.
        nonfinite_grad_step: the last t whose ∂L/∂carry_t holds NaN/Inf (where the reverse
            pass, walking back from T, first produced one), or None.
        timing: compile and run times, peak memory, FLOPs, device.
        data: the data set's label (``digits pixels``, ``text prose T=100``, a file's name)
            when the inputs came from one, else None.
        weights: the trained weights' label (``Weights.label``) when ``params`` were given,
            else None (the seed's initialisation).
        readout: on data, whose readout the loss reads the outputs through: ``"trained"``
            (the weights' own, when it fits the data) or ``"seed"`` (drawn by the seed);
            None without data.
    """

    config: RunConfig
    loss: float
    grad_norms: np.ndarray
    component_grad_norms: dict[str, np.ndarray]
    example_grad_norms: np.ndarray
    input_grad_norms: np.ndarray
    carries: dict[str, np.ndarray]
    carry_norms: np.ndarray
    component_carry_norms: dict[str, np.ndarray]
    params: dict[str, Any]
    param_grads: dict[str, Any]
    learned_carry_grad: dict[str, np.ndarray] | None
    param_grad_by_step: np.ndarray | None
    param_groups: tuple[str, ...]
    inputs: np.ndarray
    final_carry: dict[str, np.ndarray]
    log10_grad_norms: np.ndarray
    log10_component_grad_norms: dict[str, np.ndarray]
    log10_example_grad_norms: np.ndarray
    log10_source: str
    nonfinite_carry_step: int | None
    nonfinite_grad_step: int | None
    timing: Timing
    data: str | None = None
    weights: str | None = None
    readout: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values (arrays as lists, NaN/Inf as null): what ``rnnviz analyze
        --json`` prints and every other writer of an analysis starts from.

        Example:
            >>> from rnnviz import RunConfig, analyze
            >>> js = analyze(RunConfig(hidden_size=4, seq_len=5), repeats=1).to_json()
            >>> len(js["log10_grad_norms"]), js["log10_source"]
            (6, 'float32')
        """
        return finite_json(
            {
                "config": self.config.to_dict(),
                "data": self.data,
                "weights": self.weights,
                "loss": self.loss,
                "grad_norms": _floats(self.grad_norms),
                "log10_grad_norms": _floats(self.log10_grad_norms),
                "component_grad_norms": {k: _floats(v) for k, v in self.component_grad_norms.items()},
                "log10_component_grad_norms": {
                    k: _floats(v) for k, v in self.log10_component_grad_norms.items()
                },
                "log10_source": self.log10_source,
                "input_grad_norms": _floats(self.input_grad_norms),
                "carry_norms": _floats(self.carry_norms),
                "nonfinite_carry_step": self.nonfinite_carry_step,
                "nonfinite_grad_step": self.nonfinite_grad_step,
                "timing": self.timing._asdict(),
            }
        )


def _floats(x: np.ndarray) -> list[float]:
    return np.asarray(x, np.float64).tolist()


__all__ = ["Analysis"]
