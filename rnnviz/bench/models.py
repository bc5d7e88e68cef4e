"""The models suite (``rnnviz bench --suite models``): rnnviz's analysis of a whole model against
transformers' own forward + backward of the same checkpoint, in one process.

For each model type a model with random weights of a fixed shape (:data:`REAL`, :data:`TINY`) is built with
transformers (``XForCausalLM(XConfig(...))``) and saved with ``save_pretrained`` into a
temporary folder; then, one after the other in this process, with the same number of threads
(:func:`threads`: the CPUs this process may run on, which XLA:CPU sizes its pool to, and
``torch.set_num_threads`` set to match):

1. **rnnviz** — :func:`rnnviz.load_model` and :func:`rnnviz.analyze_model` on ``B × T`` random
   tokens: the first call's compile seconds apart, then the median of a few runs;
2. **transformers** — ``from_pretrained`` of the same folder (float32, train mode) and
   ``model(ids, labels=ids, use_cache=False).loss.backward()``: the first call apart, then the
   median of the steady calls (at the real size one: transformers' sequential scans make a
   backward take minutes there);
3. **the GEMM floor** — 6 · parameters · B · T FLOPs (a forward and a backward through every
   weight once) over the FLOP/s of a large float32 GEMM measured in JAX right before the analysis.

Each phase's peak memory is the process's peak resident set during it (:func:`rss_peak`).
Before loading, the analysis's memory is estimated from the checkpoint's shapes alone (XLA's
count of the buffers of the analysis compiled for them, :func:`estimate_bytes`); where float32
weights would not fit what the machine has available, the weights load in bfloat16, and where
neither fits, the type is recorded as not run.

One ``kind: "model"`` record per type (:data:`rnnviz.base.measurements.MODEL_FIELDS`) holds
every number its ratios are computed from; a type that fails or does not fit becomes a
``kind: "error"`` record and the others still run. torch and transformers are needed (the
``test`` extra); without them the suite says so and measures nothing.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.measurements import SCHEMA
from rnnviz.bench.references import gemm_flops_per_s
from rnnviz.checkpoints import FAMILIES
from rnnviz.config import ConfigError
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.engine.blocks.gradients import model_gradients
from rnnviz.engine.compile import compile_for
from rnnviz.engine.environment import run_stamp
from rnnviz.studies.models import analyze_model, load_model

#: transformers' config and model class of each type the suite builds.
CLASSES = {
    "mamba": ("MambaConfig", "MambaForCausalLM"),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "recurrent_gemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM"),
    "xlstm": ("xLSTMConfig", "xLSTMForCausalLM"),
}
TYPES = tuple(CLASSES)


class Size(NamedTuple):
    """One model's shape: the transformers config's fields and the tokens it reads.

    Attributes:
        config: keyword arguments of the type's transformers config.
        seq_len: T.
        batch_size: B.
    """

    config: dict[str, Any]
    seq_len: int
    batch_size: int


_MAMBA_130M = dict(
    vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=24, expand=2, conv_kernel=4
)
#: The real size: mamba-130m's shape for Mamba and FalconMamba; mamba2-130m's for Mamba-2 (tied
#: embeddings, 24 heads of 64, state 128); RecurrentGemma-2B's pattern scaled to d = 768 (18
#: layers, two recurrent to one attention, 3 heads of 256 sharing one key/value head, MLP 3d);
#: the xLSTM-7B block at d = 768 (10 blocks, 4 heads); 122–148 M parameters, T = 512, B = 1.
REAL = {
    "mamba": Size(_MAMBA_130M, 512, 1),
    "falcon_mamba": Size(_MAMBA_130M, 512, 1),
    "mamba2": Size(
        dict(
            vocab_size=50288,
            hidden_size=768,
            state_size=128,
            num_hidden_layers=24,
            expand=2,
            conv_kernel=4,
            head_dim=64,
            num_heads=24,
            n_groups=1,
            chunk_size=256,
            tie_word_embeddings=True,
        ),
        512,
        1,
    ),
    "recurrent_gemma": Size(
        dict(
            vocab_size=50280,
            hidden_size=768,
            lru_width=768,
            num_hidden_layers=18,
            intermediate_size=2304,
            num_attention_heads=3,
            num_key_value_heads=1,
        ),
        512,
        1,
    ),
    "xlstm": Size(dict(vocab_size=50304, hidden_size=768, num_blocks=10, num_heads=4), 512, 1),
}
#: The tiny size: every type in a few seconds (the tests' size).
TINY = {
    "mamba": Size(dict(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2), 12, 2),
    "falcon_mamba": Size(dict(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2), 12, 2),
    "mamba2": Size(
        dict(
            vocab_size=64,
            hidden_size=16,
            state_size=4,
            num_hidden_layers=2,
            head_dim=8,
            num_heads=4,
            n_groups=1,
        ),
        12,
        2,
    ),
    "recurrent_gemma": Size(
        dict(
            vocab_size=64,
            hidden_size=16,
            lru_width=16,
            num_hidden_layers=3,
            intermediate_size=32,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        12,
        2,
    ),
    "xlstm": Size(dict(vocab_size=64, hidden_size=16, num_blocks=2, num_heads=2), 12, 2),
}


class Profile(NamedTuple):
    """How much the suite measures at one size.

    Attributes:
        name: ``"real"`` or ``"tiny"``.
        sizes: type → :class:`Size`.
        repeats: the analysis's timed runs after its first.
        reference_repeats: transformers' steady calls after its first.
        gemm: ``(m, k, n)`` of the GEMM whose FLOP/s is the floor's rate.
        gemm_repeats: its timed runs (the median is used).
    """

    name: str
    sizes: dict[str, Size]
    repeats: int
    reference_repeats: int
    gemm: tuple[int, int, int]
    gemm_repeats: int


PROFILES = {
    "real": Profile("real", REAL, repeats=3, reference_repeats=1, gemm=(2048, 2048, 2048), gemm_repeats=5),
    "tiny": Profile("tiny", TINY, repeats=3, reference_repeats=2, gemm=(256, 256, 256), gemm_repeats=5),
}
#: The analysis may use at most this share of the memory available when it starts.
MEMORY_SHARE = 0.8
WHY_TORCH = (
    "the models suite builds its checkpoints with transformers and times transformers' own forward + "
    "backward: install torch and transformers (the test extra: pip install 'rnnviz[test]')"
)


def reference_modules() -> tuple[Any, Any]:
    """``(torch, transformers)``.

    Raises:
        ConfigError: either is not installed (the suite needs both, and says why).
    """
    try:
        torch, transformers = importlib.import_module("torch"), importlib.import_module("transformers")
    except ImportError as err:
        raise ConfigError("suite", "models", f"{WHY_TORCH} ({err})") from None
    # transformers' own xLSTM is the reference: with NX-AI's xlstm package installed it would
    # build its xLSTM from that package's kernels instead (if its modules are not imported yet)
    transformers.utils.is_xlstm_available = lambda: False
    return torch, transformers


def threads() -> int:
    """The CPUs this process may run on: the size of XLA:CPU's thread pool, and what
    ``torch.set_num_threads`` is set to."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_peak(run: Callable[[], Any]) -> tuple[Any, int, int, str]:
    """Run ``run()`` and read the process's peak resident set during it.

    Linux resets the high-water mark (``VmHWM``) to the current resident set when ``5`` is
    written to ``/proc/self/clear_refs``; where that fails the peak is ``ru_maxrss``, the
    process's peak since it started, and the note says so.

    Returns:
        ``(run's result, resident bytes before, peak resident bytes during, note)``.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        reset = _status_bytes("VmHWM") is not None
    except OSError:
        reset = False
    before = _status_bytes("VmRSS") or 0
    out = run()
    if reset:
        # at least what was resident when the phase began: the kernel raises VmHWM lazily (on
        # unmapping), so pages touched after the reset and released by madvise may not count
        hwm = max(before, _status_bytes("VmHWM") or 0)
        return out, before, hwm, "VmHWM during the phase (reset through clear_refs)"
    scale = 1 if sys.platform == "darwin" else 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return out, before, peak, "ru_maxrss: the process's peak since it started (VmHWM could not be reset)"


def available_bytes() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` (the free physical memory where it is missing)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def estimate_bytes(model_type: str, config: dict[str, Any], batch: int, seq_len: int, dtype: str) -> int:
    """The analysis's memory from the checkpoint's ``config.json`` alone, before any weight is read:
    XLA's count of one call's buffers (weights, tokens, temporaries and outputs) for the analysis
    compiled from stand-ins of the checkpoint's shapes in ``dtype``.

    A tied tensor counts twice (the loaded model holds it once); the float64 pass that
    :func:`~rnnviz.analyze_model` runs where float32 norms underflow is not counted.

    Args:
        model_type: a key of :data:`CLASSES`.
        config: the saved ``config.json``.
        batch: B.
        seq_len: T.
        dtype: ``"float32"`` or ``"bfloat16"``.

    Returns:
        Bytes.
    """
    family = FAMILIES[model_type]
    spec = family.parse(config, "config.json")
    params = {k: jax.ShapeDtypeStruct(s, jnp.dtype(dtype)) for k, s in family.tensors(spec).items()}
    widths = (getattr(spec, "input_size", spec.d_model),) + (spec.d_model,) * spec.n_layers
    fn = functools.partial(model_gradients, module_of(model_type, spec), spec, widths, jnp.float32)
    tokens = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)
    return compile_for(fn, (params, tokens, jax.ShapeDtypeStruct((), jnp.int32)), jax.devices()[0]).peak_bytes


def choose_dtype(estimate: Callable[[str], int], available: int) -> tuple[str | None, int, str]:
    """The weights' dtype whose estimate fits :data:`MEMORY_SHARE` of ``available``: float32, else
    bfloat16 (estimated only then), else none.

    Args:
        estimate: dtype → bytes (:func:`estimate_bytes`).
        available: bytes available now (:func:`available_bytes`).

    Returns:
        ``(dtype or None when neither fits, its estimate (float32's when none), the reason in words)``.
    """
    room = MEMORY_SHARE * available
    gb = lambda n: f"{n / 1e9:.1f} GB"  # noqa: E731
    wide = estimate("float32")
    if wide <= room:
        return "float32", wide, f"float32: estimated {gb(wide)} of {gb(available)} available"
    narrow = estimate("bfloat16")
    if narrow <= room:
        why = f"float32 weights would not fit (estimated {gb(wide)}; {gb(narrow)} in bfloat16"
        return "bfloat16", narrow, f"bfloat16: {why}, of {gb(available)} available)"
    return (
        None,
        wide,
        (
            f"not run: estimated {gb(wide)} in float32 and {gb(narrow)} in bfloat16, over "
            f"{MEMORY_SHARE:.0%} of the {gb(available)} available"
        ),
    )


def build_checkpoint(model_type: str, size: Size, folder: Path, seed: int = 0) -> None:
    """A transformers model of ``size`` with random weights (its own initialisation, seeded),
    saved with ``save_pretrained`` into ``folder``."""
    torch, transformers = reference_modules()
    config_cls, model_cls = (getattr(transformers, name) for name in CLASSES[model_type])
    torch.manual_seed(seed)
    model = model_cls(config_cls(**size.config))
    model.save_pretrained(folder)
    del model
    gc.collect()


class Analysis(NamedTuple):
    """rnnviz's side of one row.

    Attributes:
        n_params: the model's parameters, each tied tensor once.
        load_s: seconds :func:`~rnnviz.load_model` took.
        compile_s: seconds compiling the analysis (the first call's ``compile_s``).
        first_call_s: wall seconds of the first :func:`~rnnviz.analyze_model` call, compiling included.
        first_run_s: that call's ``run_s``.
        calls: wall seconds of each later call (the float64 pass included where it ran).
        cpu: the process's CPU seconds (every thread) during each later call.
        passes: each later call's ``run_s`` (the float32 pass alone).
        log10_source: the last call's ``log10_source``: whether the float64 pass ran.
    """

    n_params: int
    load_s: float
    compile_s: float
    first_call_s: float
    first_run_s: float
    calls: list[float]
    cpu: list[float]
    passes: list[float]
    log10_source: str


def measure_analysis(folder: Path, tokens: np.ndarray, dtype: str, repeats: int) -> Analysis:
    """:func:`~rnnviz.load_model` and :func:`~rnnviz.analyze_model` as a user calls them: the
    first call, then ``repeats`` calls reusing its executables, each timed whole."""
    start = time.perf_counter()
    model = load_model(folder, dtype=dtype)
    jax.block_until_ready(model.params)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    first = analyze_model(model, tokens)
    first_call_s = time.perf_counter() - start
    calls, cpu, passes, last = [], [], [], first
    for _ in range(repeats):
        start, cpu0 = time.perf_counter(), time.process_time()
        last = analyze_model(model, tokens)
        calls.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu0)
        passes.append(last.run_s)
    return Analysis(
        model.n_params,
        load_s,
        first.compile_s,
        first_call_s,
        first.run_s,
        calls,
        cpu,
        passes,
        last.log10_source,
    )


class Reference(NamedTuple):
    """transformers' side of one row, the first call first.

    Attributes:
        calls: ``(forward, backward)`` wall seconds of each call.
        cpu: the process's CPU seconds (every thread) during each call.
        implementation: what ran, in words.
    """

    calls: list[tuple[float, float]]
    cpu: list[float]
    implementation: str


def measure_reference(model_type: str, folder: Path, tokens: np.ndarray, repeats: int) -> Reference:
    """transformers' ``model(ids, labels=ids, use_cache=False).loss.backward()`` on the saved
    folder (float32, train mode): the first call, then ``repeats`` steady ones."""
    torch, transformers = reference_modules()
    model = getattr(transformers, CLASSES[model_type][1]).from_pretrained(folder, dtype=torch.float32)
    model.train()
    ids = torch.as_tensor(tokens, dtype=torch.long)
    calls, cpu = [], []
    for _ in range(1 + repeats):
        model.zero_grad(set_to_none=True)
        start, cpu0 = time.perf_counter(), time.process_time()
        loss = model(ids, labels=ids, use_cache=False).loss
        mid = time.perf_counter()
        loss.backward()
        calls.append((mid - start, time.perf_counter() - mid))
        cpu.append(time.process_time() - cpu0)
    what = (
        f"transformers {transformers.__version__} {CLASSES[model_type][1]}, torch {torch.__version__}, "
        f"float32, train mode, {torch.get_num_threads()} threads"
    )
    return Reference(calls, cpu, what)


def _median(values: Sequence[float]) -> float:
    return float(np.median(values))


def model_record(
    model_type: str,
    size: Size,
    profile: Profile,
    analysis: Analysis,
    dtype: str,
    dtype_note: str,
    phases: dict[str, Any],
    reference: Reference | None,
    gemm_rate: float,
    n_threads: int,
) -> dict[str, Any]:
    """The schema-1 ``kind: "model"`` record of one type (:data:`~rnnviz.base.measurements.MODEL_FIELDS`)."""
    run_s = _median(analysis.calls)
    floor_flops = 6.0 * analysis.n_params * size.batch_size * size.seq_len
    floor_s = floor_flops / gemm_rate
    ref: dict[str, Any] = dict(
        reference_first_forward_s=None,
        reference_first_backward_s=None,
        reference_first_s=None,
        reference_forward_s=None,
        reference_backward_s=None,
        reference_run_s=None,
        reference_repeats=0,
        ratio_to_reference=None,
        reference_first_cpu_s=None,
        reference_run_cpu_s=None,
        cpu_ratio_to_reference=None,
        reference="not measured (--skip-reference)",
    )
    if reference is not None:
        (fwd0, bwd0), steady = reference.calls[0], reference.calls[1:]
        total = _median([f + b for f, b in steady])
        ref.update(
            reference_first_forward_s=fwd0,
            reference_first_backward_s=bwd0,
            reference_first_s=fwd0 + bwd0,
            reference_forward_s=_median([f for f, _ in steady]),
            reference_backward_s=_median([b for _, b in steady]),
            reference_run_s=total,
            reference_repeats=len(steady),
            ratio_to_reference=run_s / total,
            reference_first_cpu_s=reference.cpu[0],
            reference_run_cpu_s=_median(reference.cpu[1:]),
            cpu_ratio_to_reference=_median(analysis.cpu) / _median(reference.cpu[1:]),
            reference=reference.implementation,
        )
    label = f"{model_type} {analysis.n_params / 1e6:.1f}M T={size.seq_len} B={size.batch_size} {dtype}"
    return {
        "schema": SCHEMA,
        "kind": "model",
        "suite": "models",
        "label": label,
        "config": {"model_type": model_type, **size.config},
        **run_stamp(jax.devices()[0]),
        "size": profile.name,
        "model_type": model_type,
        "n_params": analysis.n_params,
        "seq_len": size.seq_len,
        "batch_size": size.batch_size,
        "dtype": dtype,
        "dtype_note": dtype_note,
        "threads": n_threads,
        "load_s": analysis.load_s,
        "compile_s": analysis.compile_s,
        "first_call_s": analysis.first_call_s,
        "first_run_s": analysis.first_run_s,
        "run_s": run_s,
        "run_min_s": min(analysis.calls),
        "run_max_s": max(analysis.calls),
        "repeats": len(analysis.calls),
        "pass_run_s": _median(analysis.passes),
        "run_cpu_s": _median(analysis.cpu),
        "log10_source": analysis.log10_source,
        **ref,
        "gemm_flops_per_s": gemm_rate,
        "gemm_shape": list(profile.gemm),
        "floor_flops": floor_flops,
        "floor_s": floor_s,
        "ratio_to_floor": run_s / floor_s,
        **phases,
    }


def error_record(model_type: str, size: Size, error: str) -> dict[str, Any]:
    """A ``kind: "error"`` record: ``model_type`` at ``size`` was not measured, and why."""
    return {
        "schema": SCHEMA,
        "kind": "error",
        "suite": "models",
        "label": f"{model_type} T={size.seq_len} B={size.batch_size}",
        "config": {"model_type": model_type, **size.config},
        **run_stamp(jax.devices()[0]),
        "part": model_type,
        "error": error[:2000],
    }


def measure_type(
    model_type: str,
    profile: Profile,
    n_threads: int,
    skip_reference: bool,
    out: TextIO,
) -> dict[str, Any]:
    """One type's row: build and save, estimate, the GEMM rate, rnnviz's phase, transformers' phase."""
    size = profile.sizes[model_type]
    tokens = np.random.default_rng(0).integers(0, size.config["vocab_size"], (size.batch_size, size.seq_len))
    with tempfile.TemporaryDirectory(prefix=f"rnnviz-models-{model_type}-") as tmp:
        folder = Path(tmp)
        build_checkpoint(model_type, size, folder)
        config = json.loads((folder / "config.json").read_text())
        available = available_bytes()
        dtype, estimated, dtype_note = choose_dtype(
            lambda d: estimate_bytes(model_type, config, size.batch_size, size.seq_len, d), available
        )
        if dtype is None:
            return error_record(model_type, size, dtype_note)
        # right before the analysis, under the load it meets: this machine's speed drifts
        gemm_rate = gemm_flops_per_s(profile.gemm_repeats, profile.gemm)
        print(
            f"  {model_type}: {dtype_note}; GEMM {gemm_rate / 1e9:.1f} GFLOP/s; measuring rnnviz",
            file=out,
            flush=True,
        )
        load = os.getloadavg()[0]
        analysis, before, peak, note = rss_peak(
            lambda: measure_analysis(folder, tokens.astype(np.int32), dtype, profile.repeats)
        )
        gc.collect()
        print(
            f"  {model_type}: rnnviz compiled in {analysis.compile_s:.1f} s, ran in "
            f"{np.median(analysis.calls):.2f} s (median of {len(analysis.calls)}; norms: "
            f"{analysis.log10_source}), peak resident "
            f"{peak / 1e9:.2f} GB",
            file=out,
            flush=True,
        )
        phases: dict[str, Any] = dict(
            load_average=load,
            reference_load_average=None,
            estimated_bytes=estimated,
            available_bytes=available,
            start_rss_bytes=before,
            peak_rss_bytes=peak,
            reference_start_rss_bytes=None,
            reference_peak_rss_bytes=None,
            rss_note=note,
        )
        reference = None
        if not skip_reference:
            print(f"  {model_type}: measuring transformers' forward + backward", file=out, flush=True)
            r_load = os.getloadavg()[0]
            reference, r_before, r_peak, _ = rss_peak(
                lambda: measure_reference(model_type, folder, tokens, profile.reference_repeats)
            )
            phases.update(
                reference_load_average=r_load,
                reference_start_rss_bytes=r_before,
                reference_peak_rss_bytes=r_peak,
            )
            gc.collect()
    return model_record(
        model_type, size, profile, analysis, dtype, dtype_note, phases, reference, gemm_rate, n_threads
    )


#: The printed table's header.
HEADER = (
    f"{'type':<16} {'params':>8} {'T':>5} {'dtype':<8} {'compile s':>9} {'analysis s':>10} "
    f"{'tf first s':>10} {'tf f+b s':>9} {'ratio':>6} {'cpu ratio':>9} {'floor s':>8} {'×floor':>7} "
    f"{'rnnviz GB':>9} {'tf GB':>6}"
)


def table_row(rec: dict[str, Any]) -> str:
    """One printed row of a ``kind: "model"`` record (— where transformers was not measured)."""

    def num(value: float | None, fmt: str, width: int) -> str:
        return f"{'—':>{width}}" if value is None else f"{value:>{width}{fmt}}"

    ref_peak = rec["reference_peak_rss_bytes"]
    return (
        f"{rec['model_type']:<16} {rec['n_params'] / 1e6:>7.1f}M {rec['seq_len']:>5} {rec['dtype']:<8} "
        f"{rec['compile_s']:>9.1f} {rec['run_s']:>10.2f} {num(rec['reference_first_s'], '.1f', 10)} "
        f"{num(rec['reference_run_s'], '.1f', 9)} {num(rec['ratio_to_reference'], '.3f', 6)} "
        f"{num(rec['cpu_ratio_to_reference'], '.3f', 9)} "
        f"{rec['floor_s']:>8.2f} {rec['ratio_to_floor']:>7.1f} {rec['peak_rss_bytes'] / 1e9:>9.2f} "
        f"{num(None if ref_peak is None else ref_peak / 1e9, '.2f', 6)}"
    )


def parse_types(text: str | None) -> tuple[str, ...]:
    """``--types`` (comma-separated) as a tuple of :data:`TYPES`; every type when None or empty.

    Raises:
        ConfigError: a name that is not one of :data:`TYPES`.
    """
    names = tuple(t.strip() for t in (text or "").split(",") if t.strip()) or TYPES
    unknown = [t for t in names if t not in TYPES]
    if unknown:
        raise ConfigError("types", text, f"a comma-separated list of {', '.join(TYPES)}")
    return names


def models_suite(
    sizes: str = "real",
    types: Sequence[str] = TYPES,
    skip_reference: bool = False,
    out: TextIO | None = None,
) -> list[dict[str, Any]]:
    """Measure each of ``types`` at ``sizes`` and print one table row per type.

    Args:
        sizes: ``"real"`` or ``"tiny"`` (:data:`PROFILES`).
        types: keys of :data:`CLASSES`.
        skip_reference: measure rnnviz only (transformers' backward takes minutes at the real size).
        out: where the table goes (None: ``sys.stdout`` when called).

    Returns:
        One ``kind: "model"`` record per type, or a ``kind: "error"`` one where it failed or
        did not fit.

    Raises:
        ConfigError: torch or transformers is not installed.
    """
    out = sys.stdout if out is None else out
    torch, transformers = reference_modules()  # fail before measuring anything
    transformers.utils.logging.disable_progress_bar()  # the table's lines, not a bar per save and load
    profile = PROFILES[sizes]
    n_threads = threads()
    torch.set_num_threads(n_threads)
    m, k, n = profile.gemm
    print(
        f"suite models ({profile.name}): {n_threads} threads (XLA:CPU's CPUs; torch.set_num_threads); "
        "ratio = rnnviz's analysis / transformers' forward + backward (wall, and CPU seconds); ×floor = "
        f"analysis / (6·params·B·T FLOPs at the FLOP/s of a {m}×{k}·{k}×{n} float32 GEMM in JAX, measured "
        "before each type)",
        file=out,
        flush=True,
    )
    records = []
    for model_type in types:
        try:
            rec = measure_type(model_type, profile, n_threads, skip_reference, out)
        except Exception as err:  # one type's failure never stops the others
            rec = error_record(model_type, profile.sizes[model_type], f"{type(err).__name__}: {err}")
        records.append(rec)
    print(HEADER, file=out)
    for rec in records:
        line = table_row(rec) if rec["kind"] == "model" else f"{rec['part']:<16} not measured: {rec['error']}"
        print(line, file=out, flush=True)
    return records
