"""``rnnviz explorable``: one self-contained teaching page whose sliders and menus move
through precomputed results (:mod:`rnnviz.report.explorable`).

``--preset NAME`` takes a teaching page (``--list`` names them); ``--grid FIELD=VALUES``
(repeatable, as ``rnnviz sweep --over``) sweeps any fields, and adds to or replaces a
preset's; the config flags set the other fields.
"""

from __future__ import annotations

import argparse
import sys
import time

from rnnviz.base.presets import PAGES
from rnnviz.cli.argtypes import bounded_int
from rnnviz.cli.inputs import add_config_flags, parse_over
from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig

#: The page written when neither ``--preset`` nor ``--grid`` is given.
DEFAULT_PAGE = "vanishing"


def list_text() -> str:
    """The teaching pages, one per line: name, fields swept and points, title."""
    rows = []
    for p in PAGES.values():
        points = 1
        for values in p.over.values():
            points *= len(values)
        rows.append(f"  {p.name:<12} {p.title} ({' × '.join(p.over)}: {points} points)")
    return "teaching pages (rnnviz explorable --preset NAME --out FILE.html):\n" + "\n".join(rows)


def _bar(done: int, total: int, started: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    spent = time.perf_counter() - started
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} compiled calls, {spent:.0f} s",
        end="" if done < total else "\n",
        file=sys.stderr,
        flush=True,
    )


def cmd_explorable(args: argparse.Namespace) -> int:
    """Write the page, showing the work as a progress bar on stderr.

    Returns:
        0.

    Raises:
        ConfigError: an unknown preset, a bad field or value, a grid over the size cap, or
            an output path that is not ``.html``.
    """
    if args.list:
        print(list_text())
        return 0
    if args.out is None:
        raise ConfigError("out", None, "a file to write: --out FILE.html")
    name = args.preset or (None if args.grid else DEFAULT_PAGE)
    if name is not None and name not in PAGES:
        raise ConfigError("preset", name, "one of " + ", ".join(PAGES))
    preset = None if name is None else PAGES[name]
    given = {f: getattr(args, f) for f in FIELD_SPECS if getattr(args, f, None) is not None}
    base = RunConfig.from_mapping({**(preset.changes if preset else {}), **given})
    over: dict = dict(preset.over) if preset else {}
    for item in args.grid or []:
        over.update(parse_over([part for part in item.split(";") if part.strip()]))
    if not over:
        raise ConfigError("grid", None, "at least one field to sweep: --grid FIELD=VALUES")
    # heavy imports after the arguments are known good: --list and --help need no JAX
    from rnnviz.report.explorable import check_page_size, grid_html, write_explorable
    from rnnviz.studies.explorable import explorable_grid
    from rnnviz.studies.sweep import validate_over

    over = validate_over(base, over)
    check_page_size(over, base.seq_len)
    started = time.perf_counter()
    grid = explorable_grid(base, over, k=args.k, progress=lambda d, t: _bar(d, t, started))
    title = args.title or (preset.title if preset else "Gradients over " + ", ".join(over))
    lesson = preset.lesson if preset and not args.grid else ""
    path = write_explorable(grid_html(grid, title, lesson), args.out)
    size = path.stat().st_size
    print(
        f"wrote {path} ({size / 1e6:.2f} MB, {len(grid.points)} points, "
        f"{time.perf_counter() - started:.1f} s): open it in any browser, offline"
    )
    return 0


def add_parser(sub) -> None:
    """The ``explorable`` subcommand."""
    p = sub.add_parser(
        "explorable",
        help="write one self-contained teaching page over a precomputed grid (works offline)",
        description="Write one .html file whose sliders and menus move instantly through precomputed "
        "results: a teaching preset's grid (--list) or any fields of the configuration (--grid).",
    )
    p.add_argument("--preset", metavar="NAME", help=f"a teaching page (see --list; default {DEFAULT_PAGE})")
    p.add_argument("--list", action="store_true", help="list the teaching pages and exit")
    p.add_argument(
        "--grid",
        action="append",
        metavar="FIELD=VALUES",
        help="a field and its values, e.g. recurrent_gain=0.5:1.5:11 or cell=lstm,gru (repeatable; "
        "';' separates several in one)",
    )
    p.add_argument("--out", metavar="FILE.html", help="the page to write")
    p.add_argument("--title", help="the page's heading (default: the preset's)")
    p.add_argument(
        "--k", type=bounded_int(1, 16), default=4, help="singular values per step Jacobian (1..16, default 4)"
    )
    add_config_flags(p)
    p.set_defaults(func=cmd_explorable)
