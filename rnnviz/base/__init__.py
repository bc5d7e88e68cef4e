"""JAX-free records and helpers: trained weights, recorded measurements, presets, readings of
measured curves, number formatting and the HLO check (NumPy and the standard library only)."""
