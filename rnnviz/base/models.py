"""The records of a model's analysis (NumPy, no JAX): :class:`ModelAnalysis`, what
:func:`rnnviz.analyze_model` returns, :class:`ModelJacobians`, what
:func:`rnnviz.model_jacobians` returns, and :class:`ModelStates`, what
:func:`rnnviz.studies.model_states.model_states` returns; a process that only draws them (the
dashboard's server) never imports JAX."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnviz.base.environment import no_gpu_reason
from rnnviz.base.formatting import finite_json


@dataclass(frozen=True, eq=False)
class ModelAnalysis:
    """The gradient through every layer and every step of a model, for one batch.

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from.
        loss: L: next-token cross-entropy (mean over B·(T − 1)), or a stack's ½ Σ ‖y_T‖².
        grad_norms: ``[L + 1, T]`` ‖∂L/∂x_t^{(l)}‖ over the batch (float32): x^{(l)} the residual
            stream entering block l (row 0: the embeddings; row L: the final norm's input).
        log10_grad_norms: ``[L + 1, T]`` its exact log₁₀ (−inf for a true zero; see ``log10_source``).
        state_grad_norms: ``{layer: {leaf: [T]}}`` ‖∂L/∂state_t‖ of each recurrent layer's
            state leaves (Mamba's ``h``, the mLSTM's ``C``, ``n``, ``m``, LSTM's ``c``, ``h``, …).
        log10_state_grad_norms: their exact log₁₀, alike.
        position: p, the position whose own loss ℓ_p the connectivity reads.
        connectivity: ``[T]`` ‖∂ℓ_p/∂x_s^{(0)}‖: how much position p's prediction depends on each
            input (0 after p); None where it was left out (``analyze_model(connectivity=False)``).
        log10_connectivity: its exact log₁₀, or None alike.
        log10_source: ``"float32"``, or the float64 pass's where float32 fell below 2⁻¹⁰⁰.
        tokens: each position's token text, or None.
        compile_s: seconds compiling the analysis (0 when reused).
        run_s: seconds running it.
    """

    model_type: str
    source: str
    loss: float
    grad_norms: np.ndarray
    log10_grad_norms: np.ndarray
    state_grad_norms: dict[int, dict[str, np.ndarray]]
    log10_state_grad_norms: dict[int, dict[str, np.ndarray]]
    position: int
    connectivity: np.ndarray | None
    log10_connectivity: np.ndarray | None
    log10_source: str
    tokens: list[str] | None
    compile_s: float
    run_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, dict))},
                "grad_norms": self.grad_norms.tolist(),
                "log10_grad_norms": self.log10_grad_norms.tolist(),
                **{
                    name: {
                        str(layer): {leaf: v.tolist() for leaf, v in leaves.items()}
                        for layer, leaves in d.items()
                    }
                    for name, d in (
                        ("state_grad_norms", self.state_grad_norms),
                        ("log10_state_grad_norms", self.log10_state_grad_norms),
                    )
                },
                **{
                    name: None if v is None else v.tolist()
                    for name, v in (
                        ("connectivity", self.connectivity),
                        ("log10_connectivity", self.log10_connectivity),
                    )
                },
            }
        )


@dataclass(frozen=True, eq=False)
class ModelJacobians:
    """Top-k singular values of each recurrent layer's step Jacobian J_t^{(l)}, for one example.

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from.
        example: which sequence of the batch.
        method: ``"diagonal"`` (|J_t 1| of a diagonal J_t), ``"exact"`` (jacfwd and the
            singular values) or ``"krylov"`` (matrix-free Ritz values, lower bounds).
        state_dim: D, one recurrent layer's state flattened (every layer's is the same size).
        layers: ``(l, …)`` the recurrent layers (R of them), 0-based: an attention layer has none.
        steps: ``[S]`` the positions t (1 ≤ t ≤ T − 1) at which J_t = ∂s_t/∂s_{t−1} was taken.
        singular_values: ``[R, S, k]`` σ_1 ≥ … ≥ σ_k of J_t^{(l)}.
        mean_log_sigma1: ``[R]`` the mean over the S steps of ln σ₁(J_t^{(l)}): the log of the
            most one step of layer l can stretch its state, on average (< 0: every step
            shrinks every direction). Taken over all steps it bounds the layer's top Lyapunov
            exponent from above, since ‖J_T ⋯ J_1‖ ≤ ∏ σ₁(J_t), with equality when the J_t
            share their leading singular vectors; it is not λ₁ itself.
        compile_s: seconds compiling (0 when the executable was reused).
        run_s: seconds running it.
    """

    model_type: str
    source: str
    example: int
    method: str
    state_dim: int
    layers: tuple[int, ...]
    steps: np.ndarray
    singular_values: np.ndarray
    mean_log_sigma1: np.ndarray
    compile_s: float
    run_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, tuple))},
                "layers": list(self.layers),
                "steps": self.steps.tolist(),
                "singular_values": self.singular_values.tolist(),
                "mean_log_sigma1": self.mean_log_sigma1.tolist(),
            }
        )


@dataclass(frozen=True, eq=False)
class ModelStates:
    """Each recurrent layer's state (its carry) after every step of one example.

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from (or the block it was drawn as).
        example: which sequence of the batch.
        layers: ``(l, …)`` the recurrent layers (R of them), 0-based: an attention layer has
            no state and is absent.
        leaves: ``(name, …)`` the P leaves of a recurrent layer's state in the family's order
            (Mamba's ``h``; the mLSTM's ``C``, ``n``, ``m``; an LSTM's ``c``, ``h``; …), the same
            for every recurrent layer.
        leaf_sizes: ``(n_p, …)`` the numbers in each leaf for one example (its units).
        norms: ``[R, P, T]`` ‖state_t‖ of leaf p of layer ``layers[r]`` after step t, over the
            leaf's n_p units, of this one example (float32, as the forward pass ran).
        units: P arrays ``[R, k_p, T]``: the first k_p = min(k, n_p) numbers of leaf p,
            flattened in C order, after every step t.
        compile_s: seconds compiling (0 when the executable was reused).
        run_s: seconds running it.
    """

    model_type: str
    source: str
    example: int
    layers: tuple[int, ...]
    leaves: tuple[str, ...]
    leaf_sizes: tuple[int, ...]
    norms: np.ndarray
    units: tuple[np.ndarray, ...]
    compile_s: float
    run_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, tuple))},
                "layers": list(self.layers),
                "leaves": list(self.leaves),
                "leaf_sizes": list(self.leaf_sizes),
                "norms": self.norms.tolist(),
                "units": {leaf: v.tolist() for leaf, v in zip(self.leaves, self.units)},
            }
        )


@dataclass(frozen=True, eq=False)
class ModelLyapunov:
    """The top Lyapunov exponent of each recurrent layer along one example's run
    (:func:`~rnnviz.studies.model_lyapunov.model_lyapunov`).

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from (or the block it was drawn as).
        example: which sequence of the batch.
        layers: ``(l, …)`` the recurrent layers (R of them), 0-based.
        warmup: the steps left out of λ₁'s mean.
        log_growth: ``[R, T − 1]`` ln r_t = ln ‖J_t v_{t−1}‖ for t = 1 … T − 1: how much step t
            stretches the direction carried so far (their sum to n is ln ‖J_n ⋯ J_1 v_0‖).
        lambda1: ``[R]`` the mean of ln r_t after the warm-up: λ₁ per step.
        compile_s: seconds compiling (0 when the executable was reused).
        run_s: seconds running it.
    """

    model_type: str
    source: str
    example: int
    layers: tuple[int, ...]
    warmup: int
    log_growth: np.ndarray
    lambda1: np.ndarray
    compile_s: float
    run_s: float

    def running(self) -> np.ndarray:
        """``[R, T − 1 − warmup]`` the running mean of ln r_t after the warm-up: λ₁'s estimate
        as the run goes on (its last column is :attr:`lambda1`)."""
        after = self.log_growth[:, self.warmup :]
        return np.cumsum(after, axis=1) / np.arange(1, after.shape[1] + 1)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, tuple))},
                "layers": list(self.layers),
                "log_growth": self.log_growth.tolist(),
                "lambda1": self.lambda1.tolist(),
            }
        )


@dataclass(frozen=True)
class WayCost:
    """One way of computing a model's gradients, timed and checked.

    Attributes:
        name: the way's name (:data:`~rnnviz.studies.model_costs.WAYS`).
        description: what it computes, in a sentence.
        compile_s: seconds compiling its executable (when it was compiled; not in ``run_s``).
        run_s: the median of its timed runs.
        run_min_s: the fastest of them.
        run_max_s: the slowest.
        repeats: how many runs were timed.
        ratio: ``run_s`` over plain ``jax.grad``'s median, timed in the same rounds.
        loss: the loss it returned.
        max_rel_diff: the largest relative difference of its per-step norms (the model loss's
            row of every stream row and state leaf) from the one-reverse-pass analysis's; None
            for a way without per-step norms (plain ``jax.grad``).
    """

    name: str
    description: str
    compile_s: float
    run_s: float
    run_min_s: float
    run_max_s: float
    repeats: int
    ratio: float
    loss: float
    max_rel_diff: float | None


@dataclass(frozen=True, eq=False)
class ModelStrategies:
    """The ways of computing a model's per-step gradients on one batch, timed in the same
    rounds and compared with plain ``jax.grad`` of the same loss.

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from (or the block it was drawn as).
        batch: B.
        steps: T.
        n_params: the model's parameter count.
        ways: one :class:`WayCost` per way, plain ``jax.grad`` first.
        device: where they ran, the inputs' device (the first of the weights'), as
            ``"cpu:0 cpu"`` or ``"gpu:0 NVIDIA H100 80GB HBM3"``.
    """

    model_type: str
    source: str
    batch: int
    steps: int
    n_params: int
    ways: tuple[WayCost, ...]
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if k != "ways"},
                "ways": [vars(w) for w in self.ways],
            }
        )


@dataclass(frozen=True, eq=False)
class ModelDevices:
    """The ways of computing a model's per-step gradients on each device: on every one, its
    own :class:`ModelStrategies` (its weights and inputs put there, its ways timed in their own
    rounds, their ratios to plain ``jax.grad`` on that device).

    Attributes:
        runs: one :class:`ModelStrategies` per device, in the order asked (each names its
            ``device``).
        gpus: the GPUs JAX sees, as ``"gpu:0 NVIDIA H100 80GB HBM3"`` (whether or not they ran).
    """

    runs: tuple[ModelStrategies, ...]
    gpus: tuple[str, ...]

    @property
    def gpu_reason(self) -> str | None:
        """Why no GPU ran, or None when JAX sees one."""
        return no_gpu_reason(self.gpus)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (non-finite numbers as null)."""
        return {"runs": [r.to_json() for r in self.runs], "gpus": list(self.gpus)}


@dataclass(frozen=True, eq=False)
class BlockPhase:
    """A reference block's phase diagram: the gradient reaching each input x_t, at every value
    of the design's memory knob (:data:`~rnnviz.tables.block_knobs.BLOCK_KNOBS`) and seed.

    Attributes:
        model_type: the design.
        knob: the knob's name, in words.
        symbol: its letter.
        default: the value that draws the reference's own initialisation.
        values: ``[V]`` the knob's values swept.
        seeds: ``(seed, …)`` the S seeds (each draws its own weights and inputs).
        log10_grad_norms: ``[V, S, L + 1, T]`` log₁₀ ‖∂L/∂x_t^{(l)}‖ over the batch (row 0 the
            inputs, row l the stream leaving block l), as
            :class:`ModelAnalysis`' ``log10_grad_norms``: lag T − 1 − t.
        compile_s: ``[V, S]`` seconds compiling each point's analysis (0 when reused).
        run_s: seconds running the whole sweep.
    """

    model_type: str
    knob: str
    symbol: str
    default: float
    values: np.ndarray
    seeds: tuple[int, ...]
    log10_grad_norms: np.ndarray
    compile_s: np.ndarray
    run_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, tuple))},
                "values": self.values.tolist(),
                "seeds": list(self.seeds),
                "log10_grad_norms": self.log10_grad_norms.tolist(),
                "compile_s": self.compile_s.tolist(),
            }
        )


__all__ = [
    "BlockPhase",
    "ModelAnalysis",
    "ModelDevices",
    "ModelJacobians",
    "ModelLyapunov",
    "ModelStates",
    "ModelStrategies",
    "WayCost",
]
