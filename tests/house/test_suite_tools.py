"""The suite's own tools do what the suite relies on them for."""

from __future__ import annotations

import subprocess
import sys


def test_loadgroup_runs_an_xdist_group_on_one_worker(tmp_path):
    """``make test`` runs tests/ui with ``--dist loadgroup`` so that its two soaks share one
    worker, one after the other (two soak servers at once on 2 cores time out). pytest 9.2 with
    pytest-xdist 3.8 silently dropped the grouping (hence the pin in pyproject.toml): here a
    group of four and eight loose tests run on two workers, and ``-v`` names each one's worker."""
    (tmp_path / "test_grouped.py").write_text(
        "import time, pytest\n"
        "pytestmark = pytest.mark.xdist_group('together')\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_grouped(i):\n"
        "    time.sleep(0.1)\n"
    )
    (tmp_path / "test_loose.py").write_text(
        "import time, pytest\n"
        "@pytest.mark.parametrize('i', range(8))\n"
        "def test_loose(i):\n"
        "    time.sleep(0.1)\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's addopts
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "PASSED" in line and "test_grouped" in line]
    assert len(lines) == 4, done.stdout
    assert all("@together" in line for line in lines), lines  # the node id carries the group
    workers = {line.split("]")[0] for line in lines}  # "[gw0" or "[gw1"
    assert len(workers) == 1, lines


def test_the_slow_tests_are_collected_first_and_the_rest_keep_their_order():
    """tests/conftest.py moves the tests marked ``slow`` to the front (a stable sort), so
    that a worker's queue ends on short tests: here the never-hang module's fresh-process
    probes, defined last in their file, come first."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    module = "tests/engine/test_never_hang.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", module],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    slow = [i for i, line in enumerate(ids) if "in_a_fresh_process" in line]
    assert slow == list(range(6)), ids[:8]
    rest = [line for line in ids if "in_a_fresh_process" not in line]
    source = (root / "tests/engine/test_never_hang.py").read_text()
    defined = [line.split("::")[1].split("[")[0] for line in rest]
    assert defined == sorted(defined, key=lambda name: source.index(f"def {name}(")), defined


def test_page_opens_trace_splits_the_main_threads_busy_time_by_kind_of_work():
    """``scripts/page_open.py --trace``: each event counts its own time (its nested events'
    taken out), only on the page's renderer main thread, from its navigation to the chart."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from page_open import main_thread_work

    def span(name, ts, dur, tid=1):
        return {"name": name, "ph": "X", "pid": tid, "tid": tid, "ts": ts, "dur": dur}

    events = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "CrRendererMain"}},
        {"name": "thread_name", "ph": "M", "pid": 2, "tid": 2, "ts": 0, "args": {"name": "CrRendererMain"}},
        {"name": "navigationStart", "ph": "R", "pid": 2, "tid": 2, "ts": 500},  # a blank page's, earlier
        {"name": "navigationStart", "ph": "R", "pid": 1, "tid": 1, "ts": 1000},
        span("RunTask", 1000, 1000),  # 300 µs of its own
        span("v8.evaluateModule", 1100, 500),  # 400 µs of its own
        span("FunctionCall", 1200, 100),  # called from the module's evaluation
        span("Layout", 1700, 200),
        span("RunTask", 2400, 300),  # the chart is at 2500: 100 µs of it count
        span("RunTask", 1000, 900, tid=2),  # another renderer: not the page's
    ]
    busy, kinds = main_thread_work(events, chart_ms=1.5)
    assert busy == 1.1  # ms: the two top-level tasks, the second cut at the chart
    assert dict(kinds) == {
        "other": 0.4,
        "evaluating bundles": 0.4,
        "other script (React, Plotly)": 0.1,
        "style and layout": 0.2,
    }


def test_every_folder_of_tests_runs_in_a_group_of_make_test():
    """A folder of tests the Makefile's groups leave out would never run in CI."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    groups = re.search(r"TEST_GROUPS := (.*?)\n# ", (root / "Makefile").read_text(), re.S).group(1)
    folders = {p.parent.relative_to(root).as_posix() for p in (root / "tests").rglob("test_*.py")}
    assert folders, "no tests found"
    runs = set(re.findall(r"tests/[\w/]+(?=[\s\"])", groups))  # the folders (and files) the groups name
    missing = sorted(f for f in folders if not any(f == r or f.startswith(r + "/") for r in runs))
    assert not missing, f"folders no group of make test runs: {missing}"
