"""Results → tidy pandas frames: the one JAX/NumPy → table boundary, one module per family.

Charts (:mod:`rnnviz.charts`) and CSV exports read only these frames:
:mod:`~rnnviz.frames.gradients` (per-step gradients, carries, gates),
:mod:`~rnnviz.frames.costs` (timing and recorded measurements),
:mod:`~rnnviz.frames.dynamics` (phase diagram, Jacobians, Lyapunov),
:mod:`~rnnviz.frames.training` (training curves, λ over training),
:mod:`~rnnviz.frames.connectivity` (how far back an output reaches) and
:mod:`~rnnviz.frames.verdicts` (the verdict, gate activations, the PCA path).
"""
