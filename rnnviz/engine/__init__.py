"""The JAX maths: numerics, inputs, losses, the cells, the rollout, the strategies, the
per-step gradients, the log-magnitude pass, preparation and compilation."""
