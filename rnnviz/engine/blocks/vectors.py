r"""Any design as a model of vectors: its own blocks, as its reference builds them, between a
linear input projection and a linear readout in place of its embeddings and its head.

.. math::
    e_t = W_{\mathrm{in}} x_t + b_{\mathrm{in}},\qquad
    h = \mathrm{Blocks}(e)\ \text{(the design's final norm included)},\qquad
    ŷ_t = W_{\mathrm{out}} h_t + b_{\mathrm{out}}

for inputs x ``[B, T, I]`` and outputs ŷ ``[B, T, O]``. For a design with a vocabulary, e is
what transformers calls ``inputs_embeds`` (RecurrentGemma scales it by √D as it scales its
embeddings); a stack that reads I features itself (``torch_lstm``, ``torch_gru``) takes x with
no projection. Both linear maps are drawn as torch's ``nn.Linear`` draws them,
U(−1/√fan_in, 1/√fan_in), and named ``input_proj.*`` and ``readout.*`` beside the design's own
tensors. This is how the same design reads the digits by pixel and is compared with the bare
cells (:mod:`rnnviz.studies.designs`); the probes, the states and the step Jacobians are the
design's own (this module hands them through).

Example:
    >>> from rnnviz.checkpoints.families.mamba import parse
    >>> inner = parse({"model_type": "mamba", "vocab_size": 1, "hidden_size": 8,
    ...                "num_hidden_layers": 2, "state_size": 2}, "demo")
    >>> spec = VectorSpec("mamba", inner, input_size=3, output_size=5)
    >>> params = init_params(spec, jax.random.key(0))
    >>> "backbone.embeddings.weight" in params, params["input_proj.weight"].shape
    (False, (8, 3))
    >>> forward(spec, params, jnp.ones((2, 7, 3))).shape, spec.stream_widths
    ((2, 7, 5), (3, 8, 8))
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Probes, Trajectory, init, wide_dtype
from rnnviz.engine.blocks.backbone import linear
from rnnviz.engine.blocks.registry import BLOCKS

Params = dict[str, jax.Array]

#: The tensors each design's vector model leaves out: what reads tokens and writes logits.
ENDS: dict[str, tuple[str, ...]] = {
    "mamba": ("backbone.embeddings.weight", "lm_head.weight"),
    "falcon_mamba": ("backbone.embeddings.weight", "lm_head.weight"),
    "mamba2": ("backbone.embeddings.weight", "lm_head.weight"),
    "recurrent_gemma": ("model.embed_tokens.weight", "lm_head.weight"),
    "qwen3_next": ("model.embed_tokens.weight", "lm_head.weight"),
    "xlstm": ("backbone.embeddings.weight", "lm_head.weight"),
    "slstm_stack": (),
    "torch_lstm": (),
    "torch_gru": (),
}


class VectorSpec(NamedTuple):
    """A design read as a model of vectors.

    Attributes:
        design: the design's ``model_type`` (a key of :data:`ENDS`).
        inner: the design's own spec (its vocabulary, if any, unused).
        input_size: I, the features each step reads.
        output_size: O, the readout's outputs.
    """

    design: str
    inner: Any
    input_size: int
    output_size: int

    @property
    def block(self) -> str:
        """The module computing it (:func:`~rnnviz.engine.blocks.dispatch.module_of`)."""
        return "vectors"

    @property
    def projects(self) -> bool:
        """Whether x passes through ``input_proj`` (all but a stack that reads I features)."""
        return not hasattr(self.inner, "input_size")

    @property
    def n_layers(self) -> int:
        """L, the design's blocks."""
        return self.inner.n_layers

    @property
    def d_model(self) -> int:
        """D, the width of the design's stream."""
        return self.inner.d_model

    @property
    def vocab_size(self) -> int:
        """0: it reads vectors."""
        return 0

    @property
    def stream_widths(self) -> tuple[int, ...]:
        """The L + 1 widths of the stream's probed rows: row 0 is the inputs x themselves (I),
        before any projection, so that every design's row 0 is ‖∂L/∂x_t‖ of the same inputs."""
        return (self.input_size,) + (self.d_model,) * self.n_layers


#: The designs whose ``forward`` has a chunked form (``chunked=True``): Gated DeltaNet's
#: (:func:`~rnnviz.engine.blocks.gated_deltanet.chunked_delta_rule`) and the mLSTM's
#: (:func:`~rnnviz.engine.blocks.xlstm.chunked_mlstm`).
CHUNKED_FORMS = frozenset({"qwen3_next", "xlstm"})


def forward(
    spec: VectorSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
    chunked: bool = False,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory | None, ...]]:
    """ŷ ``[B, T, O]`` float32 (float64 for float64 weights) of inputs x ``[B, T, I]``.

    Args:
        spec: the sizes.
        params: the design's tensors but its :data:`ENDS`, and ``input_proj.weight`` ``[D, I]``,
            ``input_proj.bias`` ``[D]`` (when it :attr:`~VectorSpec.projects`),
            ``readout.weight`` ``[O, D]``, ``readout.bias`` ``[O]``.
        inputs: ``<float>[B, T, I]``.
        probes: the design's probes, or None: row 0 ``[B, T, I]`` is added to x before the
            projection, the other rows and the states where the design adds them.
        with_states: also return the design's trajectories.
        head: False: the design's output ``[B, T, D]`` before the readout.
        chunked: the layers of a design in :data:`CHUNKED_FORMS` in their chunked form (what
            training asks for: the same numbers to rounding, faster; no probes, no states);
            other designs run as they always do.

    Returns:
        ŷ, or ``(ŷ, trajectories)`` with ``with_states``.
    """
    design = BLOCKS[spec.design]
    weight = params["readout.weight"]
    x = inputs.astype(weight.dtype)
    if spec.projects:
        if probes is not None:  # row 0 on x itself; the design's own row 0 (after e) stays zero
            x = x + probes.stream[0].astype(x.dtype)
            e_zero = jnp.zeros(x.shape[:2] + (spec.d_model,), probes.stream[0].dtype)
            probes = probes._replace(stream=(e_zero, *probes.stream[1:]))
        x = linear(x, params["input_proj.weight"], params["input_proj.bias"])
    form = {"chunked": True} if chunked and spec.design in CHUNKED_FORMS else {}
    out = design.forward(spec.inner, params, x, probes, with_states=with_states, head=False, **form)
    h, trajectories = out if with_states else (out, None)
    if head:
        h = linear(h.astype(weight.dtype), weight, params["readout.bias"]).astype(wide_dtype(weight.dtype))
    return (h, trajectories) if with_states else h


def state_shapes(spec: VectorSpec, batch: int, seq_len: int) -> tuple:
    """The design's own (:func:`forward` hands its states through)."""
    return BLOCKS[spec.design].state_shapes(spec.inner, batch, seq_len)


def layer_step(spec: VectorSpec, params: Params, layer: int, state: Any, inputs: Any) -> Any:
    """The design's own step of layer ``layer``."""
    return BLOCKS[spec.design].layer_step(spec.inner, params, layer, state, inputs)


def init_params(spec: VectorSpec, key: jax.Array, *, dtype: str = "float32", settings: Any = None) -> Params:
    """A fresh vector model: the design drawn as its reference draws it (its ``init_params``
    with ``settings``), its :data:`ENDS` left out, and the two linear maps drawn as
    ``nn.Linear`` draws them.

    Args:
        spec: the sizes.
        key: the PRNG key: the design draws with it, each end with its name folded in.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the design's initialisation settings (its family's ``init``), or None.

    Returns:
        ``{name: array}``.
    """
    params = dict(BLOCKS[spec.design].init_params(spec.inner, key, dtype=dtype, settings=settings))
    for name in ENDS[spec.design]:
        params.pop(name, None)
    d, i, o = spec.d_model, spec.input_size, spec.output_size
    shapes = {"readout.weight": (o, d), "readout.bias": (o,)}
    if spec.projects:
        shapes |= {"input_proj.weight": (d, i), "input_proj.bias": (d,)}
    for name, shape in shapes.items():
        # nn.Linear's bias is bounded by its weight's fan-in, not by its own single axis
        fan_in = shape[1] if len(shape) == 2 else shapes[name.replace("bias", "weight")][1]
        bound = 1.0 / fan_in**0.5
        drawn = init.uniform(-bound, bound)(init.named_key(key, name), shape)
        params[name] = drawn.astype(jnp.dtype(dtype))
    return params
