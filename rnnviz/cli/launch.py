"""``rnnviz app``: start the packaged dashboard with the project's Streamlit settings.

Streamlit reads ``.streamlit/config.toml`` only from the working directory, so an
installed rnnviz started elsewhere would fall back to Streamlit's defaults (every
interface, usage statistics on). The settings ship in the package
(``rnnviz/ui/config.toml``; the checkout's ``.streamlit/config.toml`` links to it) and are
passed as command-line flags; flags given after ``rnnviz app`` come later and win.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from rnnviz.cli.argtypes import bounded_int

UI = Path(__file__).resolve().parents[1] / "ui"  # rnnviz/ui/, beside rnnviz/cli/
ENTRY = UI / "entry.py"
CONFIG = UI / "config.toml"


def config_flags(path: Path = CONFIG) -> list[str]:
    """``[server] address = "127.0.0.1"`` → ``--server.address=127.0.0.1`` for every setting."""
    flags = []
    for section, values in tomllib.loads(path.read_text()).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags.append(f"--{section}.{key}={text}")
    return flags


def streamlit_command(port: int | None, extra: list[str]) -> list[str]:
    """The ``python -m streamlit run`` command line for the packaged dashboard."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(ENTRY), *config_flags()]
    if port is not None:
        cmd.append(f"--server.port={port}")
    return cmd + list(extra)


def cmd_app(args: argparse.Namespace) -> int:
    """``rnnviz app``: run Streamlit on the packaged dashboard (on POSIX the process becomes it).

    Args:
        args: ``port``, ``runs_dir`` (exported as ``RNNVIZ_RUNS_DIR``) and ``extra`` Streamlit flags.

    Returns:
        The exit status: 2 when ``--runs-dir`` is not a folder, else Streamlit's (0 on Ctrl-C).
    """
    env = dict(os.environ)
    if args.runs_dir:
        folder = Path(args.runs_dir).expanduser().resolve()
        if not folder.is_dir():
            print(f"error: --runs-dir {args.runs_dir!r} is not a folder", file=sys.stderr)
            return 2
        env["RNNVIZ_RUNS_DIR"] = str(folder)
    cmd = streamlit_command(args.port, args.extra)
    if os.name == "posix":
        # Become Streamlit: a SIGTERM to `rnnviz app` (a service manager, a test) then stops the
        # server itself instead of orphaning a child process that keeps the port.
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(cmd[0], cmd, env)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0


def add_parser(sub) -> None:
    """Add the ``app`` subcommand (``--port``, ``--runs-dir``; further flags go to Streamlit) to ``sub``."""
    p = sub.add_parser(
        "app",
        help="start the dashboard (Streamlit) on http://127.0.0.1:8501",
        description="Start the dashboard with rnnviz's Streamlit settings (127.0.0.1 only, XSRF on, no usage "
        "statistics). Any further --section.option=value flags go to Streamlit, e.g. "
        "--server.address=0.0.0.0 to share it on a network deliberately.",
    )
    p.add_argument(
        "--port",
        type=bounded_int(1, 65535, "a port number"),
        default=None,
        help="port to listen on (default 8501)",
    )
    p.add_argument(
        "--runs-dir",
        metavar="DIR",
        help="a folder of your own recorded runs (*.jsonl) shown next to the shipped ones; "
        "default: $RNNVIZ_RUNS_DIR when set",
    )
    p.set_defaults(func=cmd_app, takes_extra=True)
