"""The requests name jobs by name: every name the dashboard uses is a job, and a request
pickles (as the pool sends it) without the jobs' module."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import rnnviz
from rnnviz.serve import jobs as job_module
from rnnviz.serve.requests import Job, Request, jobs

PACKAGE = Path(rnnviz.__file__).parent


def test_every_job_the_dashboard_names_is_a_job():
    named = set()
    for path in [*PACKAGE.joinpath("ui").rglob("*.py"), *PACKAGE.joinpath("serve").rglob("*.py")]:
        if path.name != "jobs.py":
            named |= set(re.findall(r"\bjobs\.([a-z_]+)\b", path.read_text()))
    named -= {"py"}  # "rnnviz.serve.jobs.py" in prose
    assert len(named) > 20
    assert not {name for name in named if not callable(getattr(job_module, name, None))}


def test_a_job_is_its_name_and_calls_the_job():
    assert jobs.part_gains == Job("part_gains") and Request(jobs.phase, (1,), "r", "x").key == ("phase", 1)
    assert jobs.part_gains([0.5, 1.0, 1.5], 0, 2) == job_module.part_gains([0.5, 1.0, 1.5], 0, 2)
    sent = pickle.dumps(Request(jobs.phase, ("key", 0.5), "r", "the phase diagram"))
    script = (
        "import pickle, sys; r = pickle.loads(sys.stdin.buffer.read()); "
        "print(r.job.name, 'rnnviz.serve.jobs' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", script], input=sent, capture_output=True, check=True)
    assert out.stdout.decode().split() == ["phase", "False"]
