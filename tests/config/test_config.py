import dataclasses

import pytest

from rnnviz.config import (
    FIELD_SPECS,
    MAX_SEQ_LEN,
    ConfigError,
    RunConfig,
    estimate_memory_bytes,
    max_seq_len_within_budget,
)

BAD = [
    ("cell", "transformer"),
    ("cell", 3),
    ("activation", "gelu"),
    ("hidden_size", 0),
    ("hidden_size", -4),
    ("hidden_size", 2.5),
    ("hidden_size", True),
    ("hidden_size", 10**6),
    ("input_size", 0),
    ("seq_len", 0),
    ("seq_len", MAX_SEQ_LEN + 1),
    ("batch_size", 0),
    ("batch_size", -1),
    ("dtype", "float64"),
    ("dtype", "int8"),
    ("carry_init", "ones"),
    ("carry_scale", -1.0),
    ("carry_scale", float("nan")),
    ("recurrent_init", "xavier"),
    ("recurrent_gain", float("inf")),
    ("recurrent_gain", -0.5),
    ("inputs", "walk"),
    ("input_scale", 1e9),
    ("loss", "mse"),
    ("seed", -1),
    ("seed", 2**40),
    ("strategy", "magic"),
    ("device", "tpu"),
]


@pytest.mark.parametrize("field,value", BAD)
def test_bad_value_names_field_and_allowed_range(field, value):
    with pytest.raises(ConfigError) as err:
        RunConfig(**{field: value})
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}=")
    assert "allowed" in str(err.value)


def test_activation_on_gated_cell_is_rejected():
    with pytest.raises(ConfigError, match="activation='relu'.*gru"):
        RunConfig(cell="gru", activation="relu")


def test_forget_bias_only_for_lstm():
    RunConfig(cell="lstm", forget_bias=1.0)
    with pytest.raises(ConfigError, match="forget_bias"):
        RunConfig(cell="gru", forget_bias=1.0)


def test_memory_budget_names_the_largest_allowed_seq_len():
    cfg = dict(cell="lstm", hidden_size=2048, batch_size=1024, seq_len=5000)
    with pytest.raises(ConfigError, match=r"GiB budget; the largest seq_len that fits is \d+") as err:
        RunConfig(**cfg)
    fits = int(str(err.value).rsplit(" ", 1)[1].rstrip("."))
    RunConfig(**{**cfg, "seq_len": fits})  # exactly the suggestion is accepted
    with pytest.raises(ConfigError):
        RunConfig(**{**cfg, "seq_len": fits + 1})


def test_per_step_strategy_pays_for_t_copies_of_params():
    acc = RunConfig(cell="lstm", hidden_size=256, seq_len=1000)
    per = acc.replace(strategy="per_step")
    p = 4 * (256 * 256 + 8 * 256) + 4 * 256
    assert estimate_memory_bytes(per) - estimate_memory_bytes(acc) == 4 * p * 2 * 1000
    assert max_seq_len_within_budget(per) < MAX_SEQ_LEN


def test_config_is_frozen_and_hashable_and_shape_key_ignores_values():
    a = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.seed = 3  # type: ignore[misc]
    b = a.replace(seed=9, recurrent_gain=0.5, carry_scale=2.0, input_scale=3.0)
    assert hash(a) != hash(b) and a != b
    assert a.shape_key() == b.shape_key()
    assert a.shape_key() != a.replace(seq_len=51).shape_key()
    assert {a: 1}[RunConfig()] == 1


def test_from_mapping_coerces_strings_and_rejects_unknown_keys():
    cfg = RunConfig.from_mapping(
        {"hidden_size": "16", "batch_size": "none", "recurrent_gain": "0.9", "cell": "lstm"}
    )
    assert (cfg.hidden_size, cfg.batch_size, cfg.recurrent_gain, cfg.cell) == (16, None, 0.9, "lstm")
    with pytest.raises(ConfigError, match="hidden_size='abc'"):
        RunConfig.from_mapping({"hidden_size": "abc"})
    with pytest.raises(ConfigError, match="seq_len='3.5'"):
        RunConfig.from_mapping({"seq_len": "3.5"})
    with pytest.raises(ConfigError, match="colour"):
        RunConfig.from_mapping({"colour": "red"})


def test_every_field_has_a_spec():
    assert set(FIELD_SPECS) == {f.name for f in dataclasses.fields(RunConfig)}
