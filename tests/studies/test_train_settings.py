"""TrainSettings: one validated record of a training call's settings, the same in the library
(its keyword form builds one), the CLI, the benchmarks and the dashboard's worker (a dict)."""

import dataclasses
import inspect
import json

import jax
import numpy as np
import pytest

from rnnviz import ConfigError, RunConfig, TrainSettings
from rnnviz.studies.training import DATA_TASK, MAX_STEPS, Trainer, train, train_many

TINY = RunConfig(hidden_size=8, input_size=1, seq_len=6, batch_size=16)  # recall, lag 0


@pytest.mark.parametrize(
    "field, fields",
    [
        ("task", dict(task="sorting")),
        ("task", dict(task=None)),
        ("steps", dict(steps=0)),
        ("steps", dict(steps=MAX_STEPS + 1)),
        ("steps", dict(steps=2.5)),
        ("learning_rate", dict(learning_rate=0.0)),
        ("learning_rate", dict(learning_rate=float("nan"))),
        ("learning_rate", dict(learning_rate=11.0)),
        ("optimizer", dict(optimizer="rmsprop")),
        ("clip", dict(clip=0.0)),
        ("clip", dict(clip=-1.0)),
        ("log_every", dict(log_every=0)),
        ("log_every", dict(steps=10, log_every=11)),
        ("lag", dict(task="recall", lag=-1)),
        ("lag", dict(task="recall", lag=1.5)),
        ("lag", dict(task="adding", lag=2)),
    ],
)
def test_a_bad_setting_is_one_config_error_naming_the_field_the_value_and_what_is_allowed(field, fields):
    with pytest.raises(ConfigError, match=f"^{field}=.* is not allowed: ") as err:
        TrainSettings(**fields)
    assert err.value.field == field and err.value.allowed


def test_the_existing_messages_are_kept():
    with pytest.raises(ConfigError, match=r"^optimizer='rmsprop' is not allowed: one of adam, sgd\.$"):
        TrainSettings(optimizer="rmsprop")
    with pytest.raises(ConfigError, match=r"^log_every=20 is not allowed: an integer in \[1, 10\]\.$"):
        TrainSettings(steps=10, log_every=20)
    with pytest.raises(ConfigError, match="^lag=2 .*only the recall task takes a lag; use 0 with adding"):
        TrainSettings(lag=2)


def test_settings_are_frozen_hashable_and_plain_python_numbers():
    a = TrainSettings("recall", steps=np.int64(40), learning_rate=np.float32(0.5), log_every=20.0, lag=3)
    b = TrainSettings("recall", steps=40, learning_rate=0.5, log_every=20, lag=3)
    assert a == b and hash(a) == hash(b) and len({a, b, TrainSettings()}) == 2
    assert type(a.steps) is int and type(a.log_every) is int and type(a.learning_rate) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.steps = 10


@pytest.mark.parametrize("settings", [TrainSettings(), TrainSettings("recall", 7, 0.25, "sgd", None, 3, 2)])
def test_to_dict_and_from_dict_round_trip_through_json(settings):
    values = json.loads(json.dumps(settings.to_dict()))
    assert list(values) == [f.name for f in dataclasses.fields(TrainSettings)]
    assert TrainSettings.from_dict(values) == settings
    assert TrainSettings.from_dict({"steps": 7, "log_every": 7}) == TrainSettings(steps=7, log_every=7)
    with pytest.raises(
        ConfigError, match="^seeds=2 is not allowed: not a training setting; the settings are task"
    ):
        TrainSettings.from_dict({**values, "seeds": 2})


@pytest.mark.parametrize("fn", [train, train_many])
def test_the_keyword_defaults_are_the_records(fn):
    params = inspect.signature(fn).parameters
    for f in dataclasses.fields(TrainSettings):
        assert params[f.name].default == f.default, f.name


def test_the_settings_train_the_same_runs_as_the_keywords_bit_for_bit():
    over = {"seed": [0, 1], "learning_rate": [3e-3, 1e-2]}
    keywords = train_many(TINY, over, task="recall", steps=20, optimizer="sgd", clip=0.5, log_every=10)
    settings = TrainSettings("recall", steps=20, optimizer="sgd", clip=0.5, log_every=10)
    same = train_many(TINY, over, settings=settings)
    assert len(same) == len(keywords) == 4
    for a, b in zip(keywords, same):
        assert (a.config, a.learning_rate, a.clip, a.optimizer, a.steps) == (
            b.config,
            b.learning_rate,
            b.clip,
            b.optimizer,
            b.steps,
        )
        for name in ("losses", "metric", "grad_norm", "clipped", "profiles", "recurrent_grad"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
        jax.tree.map(lambda x, y: np.testing.assert_array_equal(x, y), a.weight_tree, b.weight_tree)
    one = train(TINY, settings=settings)
    assert (
        one.losses.tobytes()
        == train(TINY, "recall", 20, optimizer="sgd", clip=0.5, log_every=10).losses.tobytes()
    )


def test_settings_and_a_keyword_together_or_a_data_task_without_data_are_config_errors():
    with pytest.raises(ConfigError, match="^steps=30 .*settings= holds it"):
        train(TINY, steps=30, settings=TrainSettings("recall", steps=20, log_every=10))
    with pytest.raises(ConfigError, match="^task='the chosen data' .*pass it as data="):
        train(TINY, settings=TrainSettings(DATA_TASK, steps=20, log_every=10))


def test_over_values_are_checked_as_settings():
    with pytest.raises(ConfigError, match="^learning_rate=-1.0 "):
        Trainer(
            TINY, {"learning_rate": [1e-3, -1.0]}, settings=TrainSettings("recall", steps=10, log_every=10)
        )


def test_the_worker_builds_the_settings_from_the_tabs_dict():
    from rnnviz.serve import jobs

    asked = TrainSettings("recall", steps=20, learning_rate=1e-2, log_every=10)
    cfg_json = json.dumps(TINY.to_dict())
    progress = jobs.train_start("settings-test", cfg_json, {**asked.to_dict(), "seeds": 2, "batch": 16})
    try:
        trainer = jobs._TRAINERS["settings-test"]
        assert progress.steps == 20 and trainer.settings == asked
        assert [c.seed for c in trainer.cfgs] == [0, 1]
    finally:
        jobs._TRAINERS.pop("settings-test", None)
    with pytest.raises(ConfigError, match="^steps=0 "):
        jobs.train_start("settings-test", cfg_json, {**asked.to_dict(), "steps": 0, "seeds": 1, "batch": 16})
    assert "settings-test" not in jobs._TRAINERS
