"""Chart builders on their own (frames in, figures out) and the frames/diagnostics that feed them."""

import math

import numpy as np
import pandas as pd
import pytest

from rnnviz import RunConfig, analyze, charts
from rnnviz.base.theory import simple_cell_theory
from rnnviz.frames.gradients import (
    bound_frame,
    carry_heatmap_frame,
    contributions_frame,
    gates_frame,
    gradient_long_frame,
    projection_frame,
)
from rnnviz.frames.verdicts import gate_means, pca_path, verdict


@pytest.fixture(scope="module")
def simple():
    return analyze(RunConfig(activation="identity", recurrent_gain=0.9, seq_len=30, batch_size=3), repeats=1)


@pytest.fixture(scope="module")
def lstm():
    return analyze(RunConfig(cell="lstm", seq_len=20, batch_size=2, strategy="per_step"), repeats=1)


def test_gradient_figure_traces_axes_and_bound(simple):
    df = gradient_long_frame(simple, "run A")
    fig = charts.gradient_figure(df, bound_frame(simple))
    names = [t.name for t in fig.data]
    assert names[0] == "total" and names.count("per example") == 3
    assert sum(t.showlegend for t in fig.data if t.name == "per example") == 1
    assert fig.layout.xaxis.title.text == "timestep t"
    # log₁₀ of the exact magnitudes on a linear axis labelled in powers of ten
    np.testing.assert_allclose(fig.data[0].y, simple.log10_grad_norms, rtol=1e-6)
    assert list(fig.layout.yaxis.ticktext) == [
        f"10{charts.superscript(int(v))}" for v in fig.layout.yaxis.tickvals
    ]
    assert (
        min(fig.layout.yaxis.tickvals) <= np.nanmin(fig.data[0].y) + 1
        and max(fig.layout.yaxis.tickvals) >= np.nanmax(fig.data[0].y) - 1
    )
    bound = fig.data[-1]
    assert bound.name.startswith("bound") and "0.900" in bound.name
    # identity RNN, orthogonal·g: the bound is tight — it equals the measured curve.
    np.testing.assert_allclose(bound.y, simple.log10_grad_norms, atol=1e-4)


def test_gradient_figure_gaps_zeros_and_marks_nonfinite():
    df = pd.DataFrame(
        {"t": [0, 1, 2, 3], "series": "total", "value": [0.0, 10.0, np.inf, np.nan], "run": "r"}
    )
    fig = charts.gradient_figure(df)
    y = np.asarray(fig.data[0].y, dtype=float)
    assert np.isnan(y[0]) and y[1] == 1.0 and np.isnan(y[2])  # log₁₀ 10 = 1; a zero is a gap, not a mark
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].x0 == 2.0
    assert "NaN/Inf" in fig.layout.annotations[0].text


def test_multiple_runs_are_prefixed_and_coloured_apart(simple, lstm):
    df = pd.concat([gradient_long_frame(simple, "A"), gradient_long_frame(lstm, "B")])
    fig = charts.gradient_figure(df[df.series == "total"])
    assert [t.name for t in fig.data] == ["A: total", "B: total"]
    assert fig.data[0].line.color != fig.data[1].line.color


def test_empty_frames_give_titled_empty_figures():
    for fig in (
        charts.gradient_figure(pd.DataFrame(columns=["t", "series", "value", "run"])),
        charts.line_figure(pd.DataFrame(columns=["t", "series", "value"]), "T", "y"),
        charts.heatmap_figure(pd.DataFrame(), "H"),
        charts.scaling_figure(pd.DataFrame(columns=["strategy", "seq_len", "run_s", "peak_bytes"])),
        charts.speedup_figure(pd.DataFrame(columns=["seq_len", "strategy", "speedup"]), "seq_len", "S"),
    ):
        assert len(fig.data) == 0 and fig.layout.title.text


def test_heatmap_log_and_contributions(lstm):
    contrib = contributions_frame(lstm)
    assert list(contrib.index) == ["recurrent", "input", "bias"] and contrib.shape == (3, 20)
    fig = charts.heatmap_figure(contrib, "C", log10=True, colorbar="x")
    z = np.asarray(fig.data[0].z, dtype=float)
    c = contrib.to_numpy()
    assert c[0, 0] == 0.0  # h_0 = 0: step 1 adds nothing to ∂L/∂W_h, drawn as a gap
    with np.errstate(divide="ignore"):
        want = np.where(c > 0, np.log10(c), np.nan)
    np.testing.assert_allclose(z, want, rtol=1e-6)
    assert fig.data[0].colorscale and fig.data[0].colorbar.title.text == "log₁₀ x"


def test_carry_frames_projection_and_gates(lstm):
    heat = carry_heatmap_frame(lstm, "c", example=1)
    np.testing.assert_array_equal(heat.to_numpy(), lstm.carries["c"][:, 1].T)
    proj, explained = projection_frame(lstm)
    assert proj.shape == (21, 4) and 0 < explained.sum() <= 1 + 1e-9 and explained[0] >= explained[1]
    fig = charts.projection_figure(proj)
    np.testing.assert_array_equal(fig.data[0].marker.color, np.arange(21))
    g = gates_frame(lstm)
    assert set(g.series) == {"gate i", "gate f", "gate o"} and g.value.between(0, 1).all()


def test_bar_panels_and_scaling_axes():
    df = pd.DataFrame(
        {"strategy": ["accumulate", "per_step"], "run_s": [1.0, 2.0], "peak_bytes": [2**20, 2**22]}
    )
    fig = charts.bar_panels(
        df, "strategy", [("run_s", "run"), ("peak_bytes", "mem")], "Cost", color="strategy"
    )
    assert [a.text for a in fig.layout.annotations] == ["run", "mem"]
    # the theme's title: at the very top, above room for two legend rows (a wrapped legend)
    assert fig.layout.title.text == "Cost" and fig.layout.title.yanchor == "top" and fig.layout.margin.t == 80
    # coloured by the x labels themselves: no legend to repeat them
    assert len(fig.data) == 4 and sum(t.showlegend for t in fig.data) == 0
    by_device = charts.bar_panels(
        df.assign(device=["cpu", "cpu"]), "device", [("run_s", "run")], "Cost", color="strategy"
    )
    assert [t.name for t in by_device.data if t.showlegend] == ["accumulate", "per_step"]
    sc = charts.scaling_figure(
        pd.DataFrame(
            {
                "strategy": ["a", "a"],
                "seq_len": [10, 20],
                "run_s": [0.001, 0.002],
                "peak_bytes": [2**20, 2**21],
            }
        )
    )
    assert sc.layout.xaxis.type == "log" and sc.layout.yaxis2.type == "log"
    np.testing.assert_allclose(sc.data[0].y, [1.0, 2.0])
    np.testing.assert_allclose(sc.data[1].y, [1.0, 2.0])


def test_theory_sigma1_is_the_gain_for_orthogonal_init(simple):
    th = simple_cell_theory(simple)
    assert th.sigma1 == pytest.approx(0.9, rel=1e-5) and th.gamma == 1.0
    assert simple_cell_theory(analyze(RunConfig(cell="gru", seq_len=3), repeats=1)) is None


def test_verdicts():
    v = verdict(analyze(RunConfig(activation="identity", recurrent_gain=0.8, seq_len=60), repeats=1))
    assert v.kind == "vanishing" and v.log10_ratio == pytest.approx(60 * math.log10(0.8), rel=1e-3)
    assert "10⁻⁶" in v.text
    assert (
        verdict(analyze(RunConfig(activation="identity", recurrent_gain=1.2, seq_len=60), repeats=1)).kind
        == "exploding"
    )
    assert (
        verdict(analyze(RunConfig(activation="identity", recurrent_gain=1.0, seq_len=60), repeats=1)).kind
        == "stable"
    )
    assert (
        verdict(
            analyze(
                RunConfig(activation="identity", recurrent_gain=3.0, seq_len=60, dtype="float16"), repeats=1
            )
        ).kind
        == "overflow"
    )


def test_forget_bias_raises_the_mean_forget_gate():
    f0 = gate_means(analyze(RunConfig(cell="lstm", seq_len=10), repeats=1))["f"].mean()
    f1 = gate_means(analyze(RunConfig(cell="lstm", seq_len=10, forget_bias=1.0), repeats=1))["f"].mean()
    assert f1 > f0 + 0.1


def test_pca_of_a_straight_path_is_one_dimensional():
    a = analyze(
        RunConfig(
            activation="identity",
            recurrent_gain=0.0,
            seq_len=10,
            inputs="sine",
            input_scale=0.0,
            carry_init="constant",
            carry_scale=1.0,
            batch_size=None,
        ),
        repeats=1,
    )
    proj = pca_path(a)  # h_0 = 1, then h_t = b (constant): two points
    assert proj.explained[0] == pytest.approx(1.0)


def test_long_series_are_thinned_for_drawing_keeping_spikes_and_saying_so():
    t = np.arange(100_001)
    v = np.exp(-t / 1e4)
    v[5_000] = 100.0  # a spike must survive the thinning
    v[70_000] = np.nan  # and a NaN (it is marked)
    df = pd.DataFrame({"t": t, "series": "total", "value": v, "run": "r"})
    fig = charts.line_figure(df, "loss", "value", log_y=True)
    assert len(fig.data[0].x) <= charts.MAX_POINTS and "min/max of every" in fig.layout.title.text
    assert 100.0 in set(fig.data[0].y) and fig.data[0].x[0] == 0 and fig.data[0].x[-1] == 100_000
    assert any("NaN/Inf" in (a.text or "") for a in fig.layout.annotations)
    grad = charts.gradient_figure(df.assign(log10_value=np.log10(v)))
    assert len(grad.data[0].x) <= charts.MAX_POINTS and np.nanmax(grad.data[0].y) == 2.0
    heat = charts.heatmap_figure(pd.DataFrame(np.ones((3, 5_001))), "heat")
    assert len(heat.data[0].x) <= charts.MAX_COLUMNS and "one column in every" in heat.layout.title.text
    short = charts.line_figure(df.iloc[:500], "loss", "value")
    assert len(short.data[0].x) == 500 and short.layout.title.text == "loss"


def test_a_wide_path_s_principal_components_match_the_full_svd():
    # A matrix memory's path ([T+1, heads·d²] per example) takes the randomized range finder.
    from rnnviz.frames import verdicts

    rng = np.random.default_rng(1)
    t, d = 301, verdicts.FULL_SVD_MAX_UNITS + 500
    scales = 2.0 ** -np.arange(12)  # a trajectory's fast-decaying spectrum
    path = (rng.standard_normal((t, 12)) * scales) @ rng.standard_normal((12, d))
    centred = path - path.mean(axis=0)
    u, s = verdicts._leading_singular(centred)
    _, s_full, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(s[:2], s_full[:2], rtol=1e-9)
    np.testing.assert_allclose(np.abs(u[:, :2].T @ (centred @ vt[:2].T / s_full[:2])), np.eye(2), atol=1e-8)


def test_singular_values_are_a_heatmap_of_their_order_of_magnitude_sigma1_on_top():
    """k noisy crossing lines become one row per σ_i: z is log₁₀ σ (rows in σ order, columns in
    t order), the colour scale is centred on σ = 1 and symmetric, its ticks read 10ⁿ, a zero σ
    is a gap, and a long run is strided (said in the title)."""
    from rnnviz.frames.dynamics import singular_values_frame

    class Jac:  # the two fields singular_values_frame reads
        steps = np.arange(1, 6)
        singular_values = np.array(
            [[100.0, 1.0, 0.01], [10.0, 0.5, 0.0], [3.0, 0.2, 1e-3], [2.0, 1.0, 1e-4], [1.5, 0.9, 0.1]]
        )

    fig = charts.singular_values_figure(singular_values_frame(Jac), "σ")
    (trace,) = fig.data
    assert (
        trace.type == "heatmap" and list(trace.y) == ["σ1", "σ2", "σ3"] and list(trace.x) == [1, 2, 3, 4, 5]
    )
    z = np.asarray(trace.z, dtype=np.float64)
    assert z.shape == (3, 5)
    np.testing.assert_allclose(z[0], np.log10(Jac.singular_values[:, 0]))
    assert np.isnan(z[2, 1]) and np.isfinite(np.delete(z[2], 1)).all()  # σ = 0 is a gap, not −∞
    assert trace.zmid == 0.0 and trace.zmin == -4.0 and trace.zmax == 4.0  # 10⁻⁴ … 10⁴, centred on 1
    assert "10⁰" in trace.colorbar.ticktext and "10⁻⁴" in trace.colorbar.ticktext
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis.type == "category"
    # near 1 only (|log σ| < 1): plain-number ticks around 1
    near = charts.singular_values_figure(
        pd.DataFrame({"t": [1, 2], "series": ["σ1", "σ1"], "value": [1.2, 0.9]}), "σ"
    )
    assert list(near.data[0].colorbar.ticktext)[1] == "1"
    # a long run: columns strided past MAX_COLUMNS, the title says so
    steps = 3 * charts.MAX_COLUMNS
    long = pd.DataFrame({"t": np.arange(steps), "series": "σ1", "value": np.linspace(0.5, 2.0, steps)})
    drawn = charts.singular_values_figure(long, "σ")
    assert len(drawn.data[0].x) == charts.MAX_COLUMNS and "one column in every 3" in drawn.layout.title.text
    assert charts.singular_values_figure(long.iloc[:0], "σ").data == ()


def test_more_than_five_examples_are_drawn_as_bands_not_a_tangle():
    """B = 8 examples: no per-example line, but two bands over t (min…max, then the middle
    half) whose edges are the examples' log₁₀ range and quartiles at each step; the total is
    still a line. A true zero leaves that example out of its step."""
    t = np.arange(6)
    rng = np.random.default_rng(0)
    logs = -0.5 * t[:, None] + rng.normal(size=(6, 8))
    logs[2, 3] = -np.inf  # an example whose gradient is exactly 0 at t = 2
    rows = [
        pd.DataFrame(
            {"t": t, "series": f"example {b}", "value": 10.0 ** logs[:, b], "log10_value": logs[:, b]}
        )
        for b in range(8)
    ]
    total = -0.5 * t.astype(float)
    rows.append(pd.DataFrame({"t": t, "series": "total", "value": 10.0**total, "log10_value": total}))
    fig = charts.gradient_figure(pd.concat(rows, ignore_index=True).assign(run="r"))
    names = [tr.name for tr in fig.data]
    assert not any(n == "per example" for n in names) and "total" in names
    bands = [tr for tr in fig.data if str(tr.name).startswith("examples (")]
    assert [tr.name for tr in bands if tr.showlegend] == ["examples (range of 8)", "examples (middle half)"]
    finite = np.where(np.isfinite(logs), logs, np.nan)
    np.testing.assert_allclose(bands[0].y, np.nanmax(finite, axis=1))
    np.testing.assert_allclose(bands[1].y, np.nanmin(finite, axis=1))
    np.testing.assert_allclose(bands[2].y, np.nanpercentile(finite, 75, axis=1))
    np.testing.assert_allclose(bands[3].y, np.nanpercentile(finite, 25, axis=1))
    assert bands[1].fill == "tonexty" and bands[0].fill is None
    # five examples stay lines (the AppTest counts them)
    few = charts.gradient_figure(pd.concat(rows[:5] + rows[-1:], ignore_index=True).assign(run="r"))
    assert [tr.name for tr in few.data].count("per example") == 5


def test_a_data_preview_draws_a_digit_as_an_image_and_a_series_as_lines():
    """The sidebar's data preview in the house theme at 260 px: a digit as its 8×8 image (row 0
    on top), a series as one line per feature (the first eight), a text as a message."""
    from rnnviz.dataset.describe import Preview

    def drawn(title: str, **kind):
        """The preview figure of a one-sequence data set ``d`` holding ``kind``'s fields."""
        fields = dict(image=None, text=None, series=None, feature_names=("c",), input_size=1)
        return charts.preview_figure(
            Preview(
                label="d",
                description="",
                index=0,
                title=title,
                kind="classify",
                seq_len=64,
                n_sequences=1,
                **{**fields, **kind},
            )
        )

    image = np.arange(64, dtype=np.float64).reshape(8, 8) / 63
    digit = drawn("digit 3", image=image)
    assert digit.data[0].type == "heatmap" and digit.layout.height == 260
    np.testing.assert_allclose(np.asarray(digit.data[0].z), image[::-1])
    assert digit.layout.title.text == "d — digit 3" and digit.layout.font.size == 13  # the theme
    series = np.random.default_rng(0).normal(size=(20, 10))
    lines = drawn("sequence 0", series=series, feature_names=tuple(f"x{i}" for i in range(10)), input_size=10)
    assert [t.name for t in lines.data] == [f"x{i}" for i in range(8)] and lines.layout.height == 260
    assert "first 8 of 10 features" in lines.layout.title.text
    text = drawn("chars", text="abc")
    assert text.data == () and "a text" in text.layout.annotations[0].text


def test_each_recurrent_layers_sigma1_is_one_line_on_a_power_of_ten_axis():
    """layer_sigma_lines of layer_sigma_frame: a line per recurrent layer (1-based names, an
    attention layer left out), y = log₁₀ σ₁ at the steps taken, ticks 10ⁿ spanning them."""
    import types

    from rnnviz.charts.models import layer_sigma_lines
    from rnnviz.frames.models import layer_sigma_frame

    j = types.SimpleNamespace(
        layers=(0, 2),
        steps=np.array([1, 4, 7]),
        singular_values=np.array(
            [[[2.0, 1.0], [1.0, 0.5], [0.5, 0.1]], [[1e-3, 1e-4], [1e-2, 0.0], [0.1, 0.0]]]
        ),
    )
    fig = layer_sigma_lines(layer_sigma_frame(j))
    assert [t.name for t in fig.data] == ["layer 1", "layer 3"]
    np.testing.assert_allclose(fig.data[0].y, np.log10([2.0, 1.0, 0.5]))
    np.testing.assert_allclose(fig.data[1].y, [-3.0, -2.0, -1.0])
    assert list(fig.data[0].x) == [1, 4, 7]
    assert fig.layout.yaxis.ticktext[0] == "10⁻³" and fig.layout.yaxis.tickvals[-1] >= np.log10(2.0)
    # σ₁ = 1 at every step (a diagonal step that keeps its state) lies on the tick 10⁰: inside
    # the frame, not on its edge, where the axis line hides it
    flat = types.SimpleNamespace(layers=(0,), steps=np.array([1, 2]), singular_values=np.ones((1, 2, 1)))
    low, high = layer_sigma_lines(layer_sigma_frame(flat)).layout.yaxis.range
    assert low < 0.0 < high and min(-low, high) >= 0.02


def test_reach_bars_label_each_count_and_count_from_zero():
    """layer_reach_bars: every bar carries its number of steps (a reach of 0 is a bar of no
    height, so only the label shows it); the axis starts at 0 with whole-step ticks, also when
    every row reaches 0 steps (Plotly's own range there is −1…1); a long reach keeps Plotly's
    ticks."""
    from rnnviz.charts.models import layer_reach_bars

    def frame(reaches):
        rows = [("input", 0.1), ("input", 0.01), ("after block 1", 0.1), ("after block 1", 0.01)]
        return pd.DataFrame([{"row": r, "fraction": f, "reach": n} for (r, f), n in zip(rows, reaches)])

    fig = layer_reach_bars(frame([0, 0, 0, 0]))
    assert [list(t.text) for t in fig.data] == [[0, 0], [0, 0]]
    assert all(t.textposition == "outside" for t in fig.data)
    assert fig.layout.yaxis.range[0] == 0 and fig.layout.yaxis.range[1] >= 1 and fig.layout.yaxis.dtick == 1
    fig = layer_reach_bars(frame([3, 7, 40, 49]))
    assert list(fig.data[1].text) == [7, 49] and list(fig.data[1].y) == [7, 49]
    assert fig.layout.yaxis.range is None and fig.layout.yaxis.dtick is None
    assert fig.layout.yaxis.rangemode == "nonnegative"


def test_a_layer_that_reaches_the_loss_at_one_position_alone_is_drawn_as_a_point():
    """layer_lines: a series whose finite values have no finite neighbour (a stack's top row,
    nonzero at its last position alone) gets a marker there, which a line alone would not
    draw; a series with neighbours keeps its plain line."""
    from rnnviz.charts.models import layer_lines

    rows = {"input": [-3.0, -2.0, -1.0, 0.0], "after block 1": [-np.inf, -np.inf, -np.inf, 0.5]}
    df = pd.DataFrame([{"row": r, "t": t, "log10": v} for r, vs in rows.items() for t, v in enumerate(vs)])
    plain, top = layer_lines(df).data
    assert plain.mode == "lines" and plain.marker.size is None and plain.name == "input"
    assert top.mode == "lines+markers" and list(top.marker.size) == [0, 0, 0, 7]
    assert np.isnan(top.y[:3]).all() and top.y[3] == 0.5


def test_the_position_axis_names_at_most_twelve_tokens_and_every_hover_names_its_token():
    """Known tokens label the x axis (a dozen, evenly spaced: Plotly thins no array of labels,
    and a report sets three charts side by side) and every point's hover; positions alone get
    Plotly's own numeric ticks (64 labels of a block's vector inputs overlapped)."""
    from rnnviz.charts.models import layer_heatmap, layer_lines, token_connectivity

    def frame(tokens: bool, steps: int = 64) -> pd.DataFrame:
        label = (lambda t: f"{t}: w{t}") if tokens else str
        return pd.DataFrame(
            [
                {"row": r, "layer": i, "t": t, "token": label(t), "log10": -t / 10.0}
                for i, r in enumerate(("input", "after block 1"))
                for t in range(steps)
            ]
        )

    for chart in (layer_heatmap, layer_lines, token_connectivity):
        axis = chart(frame(True)).layout.xaxis
        assert axis.tickmode == "array" and len(axis.ticktext) == 11  # every 6th of 64
        assert list(axis.tickvals[:2]) == [0, 6] and axis.ticktext[1] == "6: w6"
        assert chart(frame(True, steps=12)).layout.xaxis.ticktext == tuple(f"{t}: w{t}" for t in range(12))
        assert chart(frame(False)).layout.xaxis.tickmode is None
    line = layer_lines(frame(True)).data[0]
    assert line.text[5] == "5: w5" and line.hovertemplate.startswith("input, %{text}: ")
    assert layer_lines(frame(False)).data[0].hovertemplate.startswith("input, t=%{x}: ")
    bars = token_connectivity(frame(True)[lambda d: d.layer == 0]).data[0]
    assert bars.text[63] == "63: w63" and bars.textposition == "none"


def test_a_layer_heatmaps_colour_bar_is_labelled_inside_its_range_even_within_one_decade():
    """The colours span the data's range; its labels are the powers of ten inside it, or where
    fewer than two lie inside (a model whose gradients all sat between 10⁻² and 10⁻¹ showed a
    bar with no label), its ends and middle."""
    from rnnviz.charts.models import layer_heatmap

    def bar(lo: float, hi: float):
        logs = np.linspace(lo, hi, 6)
        df = pd.DataFrame({"row": "input", "layer": 0, "t": range(6), "token": list("012345"), "log10": logs})
        trace = layer_heatmap(df).data[0]
        return list(trace.colorbar.tickvals), list(trace.colorbar.ticktext)

    assert bar(-3.2, -0.5) == ([-3.0, -2.0, -1.0], ["10⁻³", "10⁻²", "10⁻¹"])
    values, labels = bar(-1.7, -1.3)
    assert values == pytest.approx([-1.7, -1.5, -1.3]) and labels == ["2.0×10⁻²", "3.2×10⁻²", "5.0×10⁻²"]
    assert bar(-2.0, -1.0)[1] == ["10⁻²", "10⁻¹"]  # powers of ten on the range's ends count


def test_the_blocks_phase_diagram_draws_how_far_back_one_percent_arrives():
    """block_phase_reach: per knob value the furthest lag still ≥ 10⁻² (a dip below and back up
    counts the furthest; a NaN, a norm of 0, arrives nowhere), drawn as one line on the heatmap."""
    from rnnviz.charts.models import block_phase_figure
    from rnnviz.frames.models import block_phase_reach

    matrix = pd.DataFrame(
        {
            -5.0: [0.0, -1.5, -2.5, -4.0, -6.0],
            0.0: [0.0, -2.5, -1.9, -3.0, np.nan],
            5.0: [0.0, -0.1, -0.2, -0.3, -0.4],
        }
    )
    reach = block_phase_reach(matrix)
    assert reach["lag"].tolist() == [1, 2, 4]
    assert block_phase_reach(matrix, floor=-0.15)["lag"].tolist() == [0, 0, 1]
    fig = block_phase_figure(matrix, "shift of the forget-gate bias b", reach=reach)
    heat, line = fig.data
    assert heat.type == "heatmap" and line.name == "furthest lag where ≥ 1 % arrives"
    assert list(line.x) == [-5.0, 0.0, 5.0] and list(line.y) == [1, 2, 4] and fig.layout.showlegend
    assert len(block_phase_figure(matrix, "b").data) == 1  # without a reach, the heatmap alone


def test_a_state_whose_gradient_is_exactly_0_at_every_step_says_so_in_the_legend():
    """transformers' xLSTM at a fresh draw: the normaliser n gets no gradient (the max in the
    denominator takes exp(−m)); its series draws no line, and its legend entry says why."""
    from rnnviz.charts.models import state_lines

    df = pd.DataFrame(
        [
            {"series": s, "t": t, "log10": v}
            for s, vs in {"layer 1 · C": [0.7, 0.6], "layer 1 · n": [-np.inf] * 2}.items()
            for t, v in enumerate(vs)
        ]
    )
    assert [t.name for t in state_lines(df).data] == ["layer 1 · C", "layer 1 · n (exactly 0 at every step)"]


def _states(norms: np.ndarray, units: tuple, layers=(0, 2), leaves=("C", "m")):
    from rnnviz.base.models import ModelStates

    sizes = tuple(u.shape[1] for u in units)
    return ModelStates("xlstm", "test", 0, layers, leaves, sizes, norms, units, 0.0, 0.0)


def test_each_recurrent_layers_state_norms_are_one_panel_of_lines_per_leaf():
    """layer_state_norms of layer_state_frame: a panel per recurrent layer (1-based titles, an
    attention layer left out), a line per leaf in each on one 10ⁿ axis range, a zero a gap."""
    from rnnviz.charts.models import layer_state_norms
    from rnnviz.frames.models import layer_state_frame

    norms = np.array([[[1.0, 10.0, 100.0], [0.0, 1.0, 2.0]], [[1e-3, 1e-2, 1e-1], [1.0, 1.0, 1.0]]])
    fig = layer_state_norms(layer_state_frame(_states(norms, (np.zeros((2, 4, 3)), np.zeros((2, 1, 3))))))
    assert [(t.name, t.yaxis, t.showlegend) for t in fig.data] == [
        ("C", "y", True),
        ("m", "y", True),
        ("C", "y2", False),
        ("m", "y2", False),
    ]
    assert [a.text for a in fig.layout.annotations] == ["layer 1", "layer 3"]
    assert {(a.x, a.xanchor) for a in fig.layout.annotations} == {(1.0, "right")}  # clear of the legend
    np.testing.assert_allclose(fig.data[0].y, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(fig.data[2].y, [-3.0, -2.0, -1.0])
    assert np.isnan(fig.data[1].y[0]) and fig.data[1].y[2] == pytest.approx(np.log10(2.0))
    assert fig.data[0].line.color == fig.data[2].line.color != fig.data[1].line.color
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):  # the same range: the layers compare
        assert axis.ticktext[0] == "10⁻³" and axis.ticktext[-1] == "10²"
        assert tuple(axis.range) == pytest.approx((-3.15, 2.15))  # the outer ticks and 3 % of the span
    assert fig.layout.xaxis2.title.text == "step t" and list(fig.data[3].x) == [0, 1, 2]


def test_a_state_leafs_first_numbers_are_one_line_each_per_layer_panel():
    from rnnviz.charts.models import layer_state_norms, layer_state_units
    from rnnviz.frames.models import layer_state_frame, layer_units_frame

    units = (np.arange(24.0).reshape(2, 4, 3), -np.ones((2, 1, 3)))
    s = _states(np.ones((2, 2, 3)), units)
    fig = layer_state_units(layer_units_frame(s, "C"))
    assert [t.name for t in fig.data] == [f"C[{i}]" for i in range(4)] * 2
    assert [t.yaxis for t in fig.data] == ["y"] * 4 + ["y2"] * 4
    for i, trace in enumerate(fig.data):
        np.testing.assert_array_equal(trace.y, units[0][i // 4, i % 4])
    (m,) = layer_state_units(layer_units_frame(s, "m")).data[:1]
    assert m.name == "m[0]" and list(m.y) == [-1.0, -1.0, -1.0]
    none = _states(np.zeros((0, 0, 3)), (), layers=(), leaves=())
    assert "no recurrent layer" in str(layer_state_norms(layer_state_frame(none)).layout.annotations[0].text)
