"""Results → tidy pandas frames: the one JAX/NumPy → table boundary, one module per family.

Charts (:mod:`rnnviz.charts`) and CSV exports read only these frames:
:mod:`~rnnviz.frames.gradients` (per-step gradients, carries, gates),
:mod:`~rnnviz.frames.costs` (timing and recorded measurements),
:mod:`~rnnviz.frames.dynamics` (phase diagram, Jacobians, Lyapunov),
:mod:`~rnnviz.frames.training` (training curves, λ over training),
:mod:`~rnnviz.frames.connectivity` (how far back an output reaches) and
:mod:`~rnnviz.frames.verdicts` (the verdict, gate activations, the PCA path).
"""

# TRANSITIONAL (removed once rnnviz.ui imports the modules): the names from before the split
# ruff: noqa: F401
from rnnviz.frames.connectivity import connectivity_frame, sequence_gates_frame
from rnnviz.frames.costs import records_frame, speedup_frame, timing_frame
from rnnviz.frames.dynamics import (
    SURVIVAL_LOG10,
    decay_frame,
    phase_frames,
    running_frame,
    singular_values_frame,
    spectrum_frame,
)
from rnnviz.frames.gradients import (
    bound_frame,
    carry_heatmap_frame,
    carry_norm_frame,
    config_label,
    contributions_frame,
    gates_frame,
    gradient_long_frame,
    input_grad_frame,
    projection_frame,
    timestep_frame,
)
from rnnviz.frames.training import SMOOTH_STEPS, over_training_frame, profile_matrix, training_frame
