"""``rnnviz explorable``: the list of teaching pages, the default page within 5 MB, a grid of
any fields, and one line for each bad input."""

from __future__ import annotations

import pytest

from rnnviz.base.presets import PAGES
from rnnviz.cli.main import main


def test_list_names_every_teaching_page_with_its_fields_and_points(capsys):
    assert main(["explorable", "--list"]) == 0
    out = capsys.readouterr().out
    for p in PAGES.values():
        assert f"  {p.name} " in out and p.title in out
    assert "recurrent_gain × seq_len × seed: 132 points" in out


def test_the_default_page_is_the_vanishing_lesson_within_5_mb(tmp_path, capsys):
    path = tmp_path / "class.html"
    assert main(["explorable", "--out", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"wrote {path} (") and "132 points" in captured.out
    assert "] 8/8 compiled calls" in captured.err  # the progress bar: two calls per shape, four shapes
    text = path.read_text(encoding="utf-8")
    assert PAGES["vanishing"].title in text
    assert path.stat().st_size <= 5_000_000


def test_a_grid_of_any_fields_with_the_config_flags(tmp_path, capsys):
    path = tmp_path / "mine.html"
    args = ["explorable", "--grid", "cell=lstm,gru;seed=0,1", "--hidden-size", "4", "--seq-len", "8"]
    assert main([*args, "--title", "Mine", "--out", str(path)]) == 0
    assert "4 points" in capsys.readouterr().out
    assert "<h1>Mine</h1>" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--preset", "nope", "--out", "x.html"], ["preset='nope'", "vanishing", "carry-init"]),
        (["--preset", "edge"], ["out=None", "--out FILE.html"]),
        (
            ["--grid", "seed=0:1500:1501", "--grid", "seq_len=1000", "--out", "x.html"],
            ["at most 20 MB", "about"],
        ),
        (["--grid", "colour=red", "--out", "x.html"], ["over='colour'"]),
        (["--grid", "seed=1", "--out", "x.txt"], ["out='x.txt'", "ending in .html"]),
    ],
)
def test_a_bad_input_is_one_line_naming_it_and_what_is_allowed(args, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["explorable", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and all(w in err for w in words), err
    assert not list(tmp_path.iterdir())  # nothing written
