"""Training a design as its reference block (``RunConfig(block="reference")``): the compiled,
chunked, vmapped loop against PyTorch training the same stack from the same weights on the
same batches, the held-out metric against the kept weights, runs vmapped against runs alone."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from rnnviz.config import RunConfig
from rnnviz.dataset import load_dataset
from rnnviz.engine.blocks import gated_deltanet, vectors, xlstm
from rnnviz.studies.tasks.synthetic import get_task
from rnnviz.studies.training import DATA_TASK, TrainSettings, train, train_many
from rnnviz.studies.training.blocks import model_spec, task_loss
from rnnviz.studies.training.model import PROBE_BATCH, PROBE_SALT, TRAIN_SALT

torch = pytest.importorskip("torch")

STEPS = 12


def _torch_stack(params: dict, layers: int, input_size: int, hidden: int, out: int):
    lstm = torch.nn.LSTM(input_size, hidden, layers, batch_first=True).double()
    head = torch.nn.Linear(hidden, out).double()
    lstm.load_state_dict(
        {k: torch.tensor(np.asarray(v, np.float64)) for k, v in params.items() if "readout" not in k}
    )
    head.load_state_dict(
        {
            k.split(".")[1]: torch.tensor(np.asarray(v, np.float64))
            for k, v in params.items()
            if "readout" in k
        }
    )
    return lstm, head


def test_an_lstm_stack_trains_as_torch_trains_it_from_the_same_weights_on_the_same_batches():
    """rnnviz's Adam steps (clip off) on the adding task equal torch's nn.LSTM + nn.Linear with
    torch.optim.Adam, step by step; the first profile is torch's ‖∂L/∂x_t‖ on the probe batch."""
    cfg = RunConfig(
        cell="lstm",
        block="reference",
        layers=2,
        hidden_size=8,
        input_size=2,
        batch_size=6,
        seq_len=10,
        seed=3,
    )
    settings = TrainSettings("adding", steps=STEPS, learning_rate=1e-2, clip=None, log_every=STEPS)
    run = train(cfg, settings=settings)

    task = get_task("adding")
    key = jax.random.key(cfg.seed)
    spec, init = model_spec(cfg, task)
    params = vectors.init_params(spec, jax.random.split(key, 3)[0], settings=init)
    lstm, head = _torch_stack(params, 2, 2, 8, task.out_features)
    opt = torch.optim.Adam([*lstm.parameters(), *head.parameters()], lr=1e-2)

    def loss_of(x, y):
        pred = head(lstm(x)[0][:, -1])
        return torch.mean((pred[:, 0] - y) ** 2)

    probe = task.probe_batch(jax.random.fold_in(key, PROBE_SALT), PROBE_BATCH, cfg.seq_len, 0)
    x = torch.tensor(np.asarray(probe.inputs, np.float64), requires_grad=True)
    loss_of(x, torch.tensor(np.asarray(probe.targets, np.float64))).backward()
    expected = np.log10(np.linalg.norm(x.grad.numpy(), axis=(0, 2)))
    np.testing.assert_allclose(run.profiles[0], expected, atol=2e-5)

    losses = []
    for step in range(STEPS):
        batch = task.batch(jax.random.fold_in(jax.random.fold_in(key, TRAIN_SALT), step), 6, cfg.seq_len, 0)
        opt.zero_grad()
        loss = loss_of(
            torch.tensor(np.asarray(batch.inputs, np.float64)),
            torch.tensor(np.asarray(batch.targets, np.float64)),
        )
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(run.losses, losses, rtol=2e-4)
    final = run.weight_tree
    np.testing.assert_allclose(final["weight_hh_l1"][-1], lstm.weight_hh_l1.detach().numpy(), atol=5e-5)
    np.testing.assert_allclose(final["readout.weight"][-1], head.weight.detach().numpy(), atol=5e-5)


def test_vmapped_block_runs_equal_runs_alone_and_the_held_out_metric_is_the_kept_weights():
    """Two seeds of a Mamba block on the digits in one vmapped call equal each seed trained
    alone; the last held-out accuracy is the final kept weights' accuracy on the test digits."""
    data = load_dataset("digits", order="pixels")
    cfg = RunConfig(
        cell="mamba", block="reference", layers=2, hidden_size=8, input_size=1, batch_size=16, seq_len=64
    )
    settings = TrainSettings(DATA_TASK, steps=20, learning_rate=3e-3, log_every=10)
    both = train_many(cfg, {"seed": [0, 1]}, settings=settings, data=data)
    alone = train(cfg.replace(seed=1), settings=settings, data=data)
    np.testing.assert_allclose(both[1].losses, alone.losses, rtol=1e-5)
    assert both[0].losses[0] != both[1].losses[0]
    assert both[0].profiles.shape == (2, cfg.seq_len) and both[0].held_out_steps.tolist() == [10, 20]

    from rnnviz.studies.tasks.data import data_task

    task = data_task(data)
    final = {k: v[-1] for k, v in alone.weight_tree.items()}
    held = task.held_out_batch(jax.random.key(0), 0, cfg.seq_len, 0)
    _, pred = task_loss(cfg, task, final, held.inputs, held.targets)
    accuracy = float(task.metric_fn()(pred, held.targets))
    assert alone.held_out_metric[-1] == pytest.approx(accuracy, abs=1e-6)
    assert alone.metric_name == "accuracy" and 0 <= accuracy <= 1


def test_a_block_run_saves_and_reopens_bit_for_bit_and_a_file_with_foreign_tensors_is_refused(tmp_path):
    from rnnviz.base.runfile import RunFileError
    from rnnviz.studies.training import load_run

    cfg = RunConfig(
        cell="gru", block="reference", layers=2, hidden_size=4, input_size=2, batch_size=4, seq_len=6
    )
    run = train(cfg, "adding", steps=4, log_every=2)
    again = load_run(run.save(tmp_path / "run.rnnviz"))
    assert again.config == cfg and again.label == "gru block ×2 on adding T=6"
    for name, t in run.tensors().items():
        np.testing.assert_array_equal(again.tensors()[name], t)
    with pytest.raises(Exception, match="run.tensors"):
        run.weights()
    bad = run.__class__(
        **{
            **vars(run),
            "weight_tree": {**run.weight_tree, "weight_hh_l1": run.weight_tree["weight_hh_l0"][:, :3]},
        }
    )
    with pytest.raises(RunFileError, match="weight_hh_l1"):
        load_run(bad.save(tmp_path / "bad.rnnviz"))


def test_cli_trains_a_block_at_about_n_parameters_and_refuses_params_for_a_bare_cell(capsys):
    from rnnviz.cli.main import main
    from rnnviz.studies.block_models import block_param_count

    flags = ["--cell", "gru", "--block", "reference", "--layers", "2", "--seq-len", "8", "--batch-size", "4"]
    assert main(["train", *flags, "--params", "5k", "--steps", "4", "--log-every", "2", "--json"]) == 0
    out = capsys.readouterr()
    record = json.loads(out.out)
    cfg = RunConfig.from_mapping(record["config"])
    assert cfg.layers == 2 and abs(block_param_count(cfg) - 5000) <= 0.05 * 5000
    assert f"H = {cfg.hidden_size}" in out.err and len(record["losses"]) == 4
    assert main(["train", "--cell", "gru", "--params", "5k", "--steps", "4"]) == 2
    assert "with --block reference" in capsys.readouterr().err


def test_block_connectivity_is_torchs_gradient_of_the_log_probability_at_step_tau():
    from rnnviz.base.connectivity import reach
    from rnnviz.studies.block_models import block_spec
    from rnnviz.studies.training.blocks import block_connectivity

    cfg = RunConfig(cell="lstm", block="reference", layers=2, hidden_size=6, input_size=3, seq_len=9)
    spec, init = block_spec(cfg, output_size=5)
    tensors = {
        k: np.asarray(v) for k, v in vectors.init_params(spec, jax.random.key(7), settings=init).items()
    }
    x = np.random.default_rng(0).normal(size=(9, 3)).astype(np.float32)
    got = block_connectivity(cfg, tensors, x, target=2, step=7)

    lstm, head = _torch_stack(tensors, 2, 3, 6, 5)
    xt = torch.tensor(x[None].astype(np.float64), requires_grad=True)
    torch.log_softmax(head(lstm(xt)[0][0, 6]), -1)[2].backward()
    want = np.linalg.norm(xt.grad.numpy()[0], axis=1)
    np.testing.assert_allclose(10.0 ** got[:7], want[:7], rtol=1e-4)
    assert np.all(np.isneginf(got[7:]))  # nothing after τ is read
    assert reach(got, 7, 0.0) == 6


@pytest.mark.parametrize(
    "cell, layer, rule",
    [
        ("gated_deltanet", "linear_attn", (gated_deltanet, "chunked_delta_rule")),
        ("mlstm", "mlstm_layer", (xlstm, "chunked_mlstm")),
    ],
)
def test_a_block_trains_in_its_chunked_form_with_the_step_by_step_numbers(cell, layer, rule, monkeypatch):
    """Training asks for the chunked form (``vectors.forward(chunked=True)``) of the designs
    that have one (Gated DeltaNet, the mLSTM), and runs it (once per layer): the task's loss and
    its gradient with respect to every tensor equal the step-by-step form's (the analysis's),
    over T = 70 steps (one chunk of 64 and 6 more)."""
    module, rule_name = rule
    original, calls = getattr(module, rule_name), []
    monkeypatch.setattr(module, rule_name, lambda *a, **k: calls.append(1) or original(*a, **k))
    cfg = RunConfig(
        cell=cell,
        block="reference",
        layers=2,
        hidden_size=16,
        input_size=2,
        batch_size=4,
        seq_len=70,
    )
    task = get_task("adding")
    vspec, init = model_spec(cfg, task)
    params = vectors.init_params(vspec, jax.random.key(0), settings=init)
    batch = task.batch(jax.random.key(1), cfg.batch_size, cfg.seq_len, 0)

    def stepwise(p):
        pred = vectors.forward(vspec, p, batch.inputs)[:, -1]
        return task.loss_fn(cfg.seq_len)(pred, batch.targets)

    chunked = jax.jit(jax.value_and_grad(lambda p: task_loss(cfg, task, p, batch.inputs, batch.targets)[0]))
    (loss, grads), (want_loss, want_grads) = chunked(params), jax.jit(jax.value_and_grad(stepwise))(params)
    assert float(loss) == pytest.approx(float(want_loss), rel=1e-6)
    for name in want_grads:
        np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-4, atol=1e-7, err_msg=name)
    assert max(float(np.abs(g).max()) for name, g in grads.items() if layer in name) > 0
    assert len(calls) == cfg.layers  # traced once per layer, by the training's loss alone
