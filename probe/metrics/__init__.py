"""Bench-independent metric primitives (vectorised over bootstrap replicates) and analyses of the
mechanistic outputs; each benchmark's own formulas live with it in `probe.benches`."""
