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
from rnnviz.serve.settings import SETTINGS, ServerSettings, SettingsError, flag_name, kind, parse
from rnnviz.serve.warm import base_url

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
        args: ``port``, ``runs_dir`` (exported as ``RNNVIZ_RUNS_DIR``), the server's limits
            (:mod:`rnnviz.serve.settings`, exported as their ``RNNVIZ_*`` variables) and ``extra``
            Streamlit flags.

    Returns:
        The exit status: 2 when ``--runs-dir`` is not a folder or a limit is out of its bounds,
        else Streamlit's (0 on Ctrl-C).
    """
    env = dict(os.environ)
    for f in SETTINGS:  # the limits given as flags go to the server's environment
        value = getattr(args, f.name, None)
        if value is not None:
            env[f.metadata["env"]] = str(value)
    try:
        ServerSettings.from_env(env)  # a bad RNNVIZ_* variable is refused here, not in the browser
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.runs_dir:
        folder = Path(args.runs_dir).expanduser().resolve()
        if not folder.is_dir():
            print(f"error: --runs-dir {args.runs_dir!r} is not a folder", file=sys.stderr)
            return 2
        env["RNNVIZ_RUNS_DIR"] = str(folder)
    cmd = streamlit_command(args.port, args.extra)
    _start_warming(cmd, env)
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


def served_at(cmd: list[str]) -> str:
    """Where the server of a :func:`streamlit_command` answers on this machine: its port and
    base path (the last flag wins, as in Streamlit), on 127.0.0.1 when it listens everywhere.

    Example:
        >>> served_at(["streamlit", "run", "x.py", "--server.port=8501", "--server.port=9000"])
        'http://127.0.0.1:9000/'
        >>> served_at(["--server.port=8501", "--server.port", "9001", "--server.baseUrlPath=/a/"])
        'http://127.0.0.1:9001/a/'
    """
    flags: dict[str, str] = {}
    for i, token in enumerate(cmd):  # --server.port=9000 or --server.port 9000
        if token.startswith("--server."):
            name, eq, value = token[2:].partition("=")
            if eq or i + 1 < len(cmd):
                flags[name] = value if eq else cmd[i + 1]
    return base_url(
        flags.get("server.address", ""), flags.get("server.port", "8501"), flags.get("server.baseUrlPath", "")
    )


def _start_warming(cmd: list[str], env: dict[str, str]) -> None:
    """Beside the server, a short-lived process that has it run its page once as soon as it
    answers (:mod:`rnnviz.serve.warm`): the first visitor then finds the imports, the workers
    and the default analysis ready. It outlives this process's ``execve`` into Streamlit,
    and ends when the page has run (within about three minutes in any case)."""
    subprocess.Popen(
        [sys.executable, "-m", "rnnviz.serve.warm", served_at(cmd)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the terminal is the server's, not the warm-up's
    )


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
    limits = p.add_argument_group(
        "the server's limits",
        "each also read from its environment variable (shown in brackets); see the docs' "
        "'Running it for a team' page",
    )
    for f in SETTINGS:
        default = f.default if kind(f) != "folder" else "a folder under the temporary folder"
        if f.name == "jax_cache":
            default = "~/.cache/rnnviz/jax"
        limits.add_argument(
            f"--{flag_name(f)}",
            dest=f.name,
            metavar=kind(f).upper().replace("FOLDER", "DIR"),
            type=_setting_type(f),
            default=None,
            help=f"{f.metadata['what']} [{f.metadata['env']}; default {default}]",
        )
    p.set_defaults(func=cmd_app, takes_extra=True)


def _setting_type(f):
    """argparse's ``type`` for one setting: its value checked as the server will check it."""

    def check(raw: str):
        try:
            return parse(f, raw, given_as=f"--{flag_name(f)}")
        except SettingsError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return check
