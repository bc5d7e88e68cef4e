"""What users, scripts and plugins name stays named: the public names of :mod:`rnnviz`, every
option of every CLI subcommand, the dashboard's URL parameters and its tab titles (the ``tab``
parameter's values), held against ``surfaces.json``, recorded from the release before the house
move (0.2.0, flat layout). A change may add to them; one that drops or renames one fails here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import rnnviz
from rnnviz.base.presets import config_from_params, config_to_params
from rnnviz.cli.main import build_parser
from rnnviz.config import RunConfig

RECORDED = json.loads((Path(__file__).with_name("surfaces.json")).read_text())


def _options(parser: argparse.ArgumentParser) -> set[str]:
    named = {o for a in parser._actions for o in a.option_strings}
    positional = {
        a.dest
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    }
    return named | positional


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **subs.choices}


def test_every_public_name_is_still_exported():
    assert set(RECORDED["public_names"]) <= set(rnnviz.__all__)
    for name in RECORDED["public_names"]:
        assert getattr(rnnviz, name) is not None, name


@pytest.mark.parametrize("command", sorted(RECORDED["cli_options"]))
def test_every_cli_option_is_still_accepted(command):
    commands = _commands()
    assert command in commands, f"rnnviz {command} is gone"
    missing = set(RECORDED["cli_options"][command]) - _options(commands[command])
    assert not missing, f"rnnviz {command}: options dropped {sorted(missing)}"


def test_every_url_parameter_still_sets_the_config():
    # each recorded config parameter round-trips through the URL mapping: a non-default
    # value written by config_to_params is read back by config_from_params, with no warning
    fields = [p for p in RECORDED["url_parameters"] if p not in ("tab", "data")]
    assert fields, "no config parameters recorded"
    for field in fields:
        cfg, warnings = config_from_params({field: config_to_params(RunConfig()).get(field, "")}, ignore=())
        assert not any("unknown URL parameter" in w for w in warnings), (field, warnings)
    cfg = RunConfig(cell="lstm", seq_len=37, recurrent_gain=1.25, seed=3)
    back, warnings = config_from_params(config_to_params(cfg))
    assert back == cfg and not warnings


def test_the_ui_parameters_and_tab_titles_are_kept():
    from rnnviz.ui.tabs import TABS

    titles = [tab.TITLE for tab in TABS]
    # the recorded titles are all there, in their order (a new tab may sit anywhere)
    assert [t for t in titles if t in RECORDED["tabs"]] == RECORDED["tabs"]
