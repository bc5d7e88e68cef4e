"""Test set-up: strict JAX promotion (no silent dtype/rank promotion) and tiny configs."""

import os
import sys
import tempfile
from pathlib import Path

# XLA:CPU's LLVM back end at -O0 in the test processes (before JAX starts its backend): the
# suite is mostly compiling small executables, and -O0 compiles them about 40% faster
# (tests/engine/test_engine.py -k "lstm or mamba": 123 s against 208 s on 2 cores). The HLO is
# the same; the machine code rounds differently where -O3 fused a multiply and an add, so a
# comparison of two differently ordered float32 computations must allow float32's own error
# (one, test_strategies' tangent sum, allowed less and was widened to it). At H=128, T=1000 the
# code runs ~2.8× slower, so the soak's server, which runs the real sizes, gets the flags the
# suite started with (RNNVIZ_SERVER_XLA_FLAGS).
#
# And XLA:CPU's older fused-kernel emitters instead of its MLIR fusion emitters: compiling
# every built-in cell at a tiny shape, plus sweeps and Lyapunov runs, in a fresh process took
# 16.0 s of backend compile instead of 27.9–29.5 s at -O0, and tests/engine/test_strategies.py
# with test_traced.py took 144 and 155 s against 231 and 207 s on 2 workers, the whole engine
# group 649 s against 1041 s (stop 48's note).
# The product's analysis keeps the MLIR emitters (only its run-once draws drop them,
# rnnviz.engine.compile.RUN_ONCE_OPTIONS): their code runs 15–40 % faster at real sizes (LSTM
# B32·T200·H128: 86–94 ms against 100 ms a run), which matters there and not here.
#
# And one LLVM module per executable (XLA:CPU splits it into up to 32 to compile the parts on
# its thread pool, which the suite's two workers already keep busy): backend compile of the
# tiny configs 7.8–8.0 s against 9.0–9.7 s, and their code runs 10–20 % faster, split modules
# not inlining across one another at -O0 (scripts/xla_flags.py --rounds 3, docs/dev/benchmarks.md).
#
# A flag a user's XLA_FLAGS names keeps the user's value.
SUITE_XLA_FLAGS = {
    "xla_backend_optimization_level": "0",
    "xla_cpu_use_fusion_emitters": "false",
    "xla_cpu_parallel_codegen_split_count": "1",
}


# transformers' own xLSTM definitions are the xLSTM tests' oracle. With NX-AI's `xlstm` package
# installed (the sLSTM block's oracle, in the test extra), transformers would build its xLSTM
# from that package's kernels instead (mlstm_kernels: other modules, other names). Told the
# package is absent before its xLSTM modules import, transformers uses its own.
class _TransformersOwnXLSTM:
    MODULES = ("transformers.models.xlstm.configuration_xlstm", "transformers.models.xlstm.modeling_xlstm")

    def find_spec(self, name, path=None, target=None):
        if name in self.MODULES:
            import transformers.utils

            transformers.utils.is_xlstm_available = lambda: False
        return None  # the usual finders import it


sys.meta_path.insert(0, _TransformersOwnXLSTM())

os.environ.setdefault("RNNVIZ_SERVER_XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
for _name, _value in SUITE_XLA_FLAGS.items():
    if _name not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{_name}={_value}".strip()

import jax  # noqa: E402 (after XLA_FLAGS is set)
import pytest  # noqa: E402

# The app's workers turn on JAX's persistent compilation cache. AppTest runs the views in
# this process (below), which would turn it on here too: jaxlib 0.10.2 segfaulted twice in
# such a test process while serialising an executable into the cache (`executable.serialize()`
# in compilation_cache.put_executable_and_time), never reproduced alone. The test processes
# keep it off; the browser and soak servers run with their own cache folders.
os.environ.setdefault("RNNVIZ_JAX_CACHE", "off")
# AppTest drives the views in this process: computing them here too (no worker processes)
# shares this process's compiled executables instead of compiling each twice. The worker
# processes are tested on their own (test_worker.py) and behind the real browser, whose
# server sets RNNVIZ_WORKERS itself.
os.environ.setdefault("RNNVIZ_WORKERS", "0")
# A view's budget counts what this machine measured, so under the suite's load a view could
# shrink or wait for its button: AppTest checks views as drawn in full. test_budget.py sets
# budgets explicitly; the browser and soak servers run with the real one (15 s).
os.environ.setdefault("RNNVIZ_VIEW_BUDGET_S", "600")
# Trained runs the dashboard keeps go to a folder of this test process, never the user's.
os.environ.setdefault("RNNVIZ_TRAINED_DIR", tempfile.mkdtemp(prefix="rnnviz-test-trained-"))

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

from browser_helpers import CHROMIUM, FLAGS  # noqa: E402

from rnnviz import RunConfig  # noqa: E402
from rnnviz.engine.allocator import keep_freed_buffers  # noqa: E402

keep_freed_buffers()  # as the app and the CLI do: buffers stay in the heap between calls

CELLS = (
    *("simple", "lstm", "gru", "mgu", "indrnn", "mingru", "minlstm", "lru"),
    *("rglru", "mamba", "slstm", "mlstm", "gated_deltanet", "deltanet"),
)  # every built-in registration
#: The cells whose carry holds a leaf of more than one axis per example.
MATRIX_CARRIES = ("mamba", "mlstm", "gated_deltanet", "deltanet")


@pytest.fixture
def tiny() -> RunConfig:
    """A config small enough to compile in well under a second."""
    return RunConfig(hidden_size=6, input_size=3, seq_len=7, batch_size=2)


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` first, the rest in their order (a stable sort, the same in
    every xdist worker): each worker's queue then ends on short tests, so that at a group's
    end neither worker idles beside the other's long one (the engine group's last 21 s had
    one worker idle beside a 71 s probe)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# ---- the reports' browser: Debian's chromium through Playwright, once per module ----------
# A browser test skips where /usr/bin/chromium or playwright is missing, unless
# RNNVIZ_REQUIRE_BROWSER=1 (then that is a failure), as tests/ui/test_browser.py does.


def _browser_unavailable(reason: str):
    if os.environ.get("RNNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser required (RNNVIZ_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        _browser_unavailable(
            f"{CHROMIUM} is not installed (make test installs it with apt-get when run as root)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _browser_unavailable("playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()
