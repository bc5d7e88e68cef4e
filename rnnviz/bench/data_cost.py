"""What real data costs the engine: ``analyze`` on a data set's batch against synthetic
inputs of the same shape, in the same run (``bench --suite data-cost``).

Three ratios per row, data / synthetic: the *prepare* (params, initial carry and the
inputs: a batch drawn from the data on the device, or synthetic draws — what loading and
batching cost), the compiled analysis alone (the data's loss adds a readout and a softmax
to it), and the whole :func:`rnnviz.analyze` call (prepare, a warm-up and one timed
analysis, the copy to the host). All are medians of alternating calls, so the two sides
see the same machine state (a millisecond-long call on this 2-core machine varies by ±20 %
between blocks of calls)."""

from __future__ import annotations

import statistics
import sys
import time

import jax

from rnnviz.analysis import analyze, executables
from rnnviz.config import RunConfig
from rnnviz.dataset import fit_to_data, load_dataset
from rnnviz.engine.prepare import data_on, prepared_batch, resolve_device, static_config
from rnnviz.studies.comparisons import measure

#: ``(source, options, config)`` rows: the digits pixel by pixel and by rows, a text window.
ROWS = (
    ("digits", {"order": "pixels"}, RunConfig(cell="lstm", hidden_size=128, batch_size=64)),
    ("digits", {"order": "rows"}, RunConfig(cell="gru", hidden_size=128, batch_size=64)),
    ("text", {"seq_len": 100}, RunConfig(cell="lstm", hidden_size=128, batch_size=32)),
)


def _alternating(fns_args, repeats: int) -> list[list[float]]:
    """Seconds of each ``(fn, args)``, called in turn ``repeats`` times after a warm-up."""
    times: list[list[float]] = [[] for _ in fns_args]
    for fn, args in fns_args:
        for _ in range(3):
            jax.block_until_ready(fn(*args))
    for _ in range(repeats):
        for out, (fn, args) in zip(times, fns_args):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            out.append(time.perf_counter() - start)
    return times


def _compiled_analyses(cfg: RunConfig, ds, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of the compiled analysis on synthetic inputs and on a data batch, alternating."""
    device = resolve_device(cfg)
    static = static_config(cfg)
    spec = data_on(cfg, device, ds)[1]
    synthetic = (executables(static, device).analysis.fn, tuple(prepared_batch(cfg, device)))
    on_data = (executables(static, device, spec).analysis.fn, tuple(prepared_batch(cfg, device, ds)))
    return tuple(_alternating([synthetic, on_data], repeats))


def _prepares(cfg: RunConfig, ds, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of :func:`rnnviz.engine.prepare.prepared_batch` (a new seed each call), synthetic
    and on data, alternating."""
    device = resolve_device(cfg)
    seeds = iter(range(10**9))

    def draw(data):
        return lambda: prepared_batch(cfg.replace(seed=next(seeds)), device, data)

    return tuple(_alternating([(draw(None), ()), (draw(ds), ())], repeats))


def _with_times(record: dict, times: list[float]) -> dict:
    return {
        **record,
        "run_s": statistics.median(times),
        "run_min_s": min(times),
        "run_max_s": max(times),
        "repeats": len(times),
        "ratio_to_plain_grad": None,
    }


def _whole_calls(cfg: RunConfig, ds, repeats: int) -> tuple[float, float]:
    """Median seconds of a whole ``analyze`` call, synthetic and on data, alternating."""
    synthetic, data = [], []
    for cfg_i in (cfg, cfg.replace(seed=1)):  # warm both paths, and the seed's draw
        analyze(cfg_i, repeats=1, log_pass=False)
        analyze(cfg_i, repeats=1, log_pass=False, data=ds)
    for i in range(repeats):
        c = cfg.replace(seed=i)  # a new batch every call, as the dashboard's seed does
        start = time.perf_counter()
        analyze(c, repeats=1, log_pass=False)
        synthetic.append(time.perf_counter() - start)
        start = time.perf_counter()
        analyze(c, repeats=1, log_pass=False, data=ds)
        data.append(time.perf_counter() - start)
    return statistics.median(synthetic), statistics.median(data)


def data_cost_bench(repeats: int = 20, out=sys.stdout) -> list[dict]:
    """Print the table; return the compiled analyses' schema-1 records (suite ``data-cost``)."""
    print(
        "suite data-cost: analyze on a data set's batch / on synthetic inputs of the same shape "
        f"(medians of {10 * repeats} alternating compiled calls, {repeats} alternating whole calls)",
        file=out,
    )
    print(
        f"{'data':<16} {'config':<30} {'prepare ms':>11} {'data ms':>8} {'ratio':>6} "
        f"{'analysis ms':>12} {'data ms':>8} {'ratio':>6} {'whole call ms':>14} {'data ms':>8} {'ratio':>6}",
        file=out,
    )
    records = []
    for name, options, base in ROWS:
        ds = load_dataset(name, **options)
        cfg = fit_to_data(base, ds)
        # records (schema 1) from measure, with the alternating times
        times_s, times_d = _compiled_analyses(cfg, ds, 10 * repeats)
        synthetic = _with_times(measure(cfg, repeats=1, suite="data-cost"), times_s)
        on_data = _with_times(measure(cfg, repeats=1, suite="data-cost", data=ds), times_d)
        ratio = on_data["run_s"] / synthetic["run_s"]
        prep_s, prep_d = (statistics.median(t) for t in _prepares(cfg, ds, 10 * repeats))
        whole_s, whole_d = _whole_calls(cfg, ds, repeats)
        shape = f"{cfg.cell} B={cfg.batch_size} T={cfg.seq_len} I={cfg.input_size} H={cfg.hidden_size}"
        print(
            f"{ds.label:<16} {shape:<30} "
            f"{prep_s * 1e3:>11.3f} {prep_d * 1e3:>8.3f} {prep_d / prep_s:>6.3f} "
            f"{synthetic['run_s'] * 1e3:>12.2f} {on_data['run_s'] * 1e3:>8.2f} {ratio:>6.3f} "
            f"{whole_s * 1e3:>14.2f} {whole_d * 1e3:>8.2f} {whole_d / whole_s:>6.3f}",
            file=out,
        )
        records += [synthetic, on_data]
    return records
