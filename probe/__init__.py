"""probe: exact cultural-preference distributions from option-letter logits.

`import probe` stays light (no torch, no transformers): the API loads on first use.
"""

from probe.version import __version__

__all__ = ["__version__", "compare_runs", "load_run", "paired_difference", "recompute_metrics"]


def load_run(path):  # type: ignore[no-untyped-def]
    """Load a run directory (see `probe.api.load_run`)."""
    # Imported here, not at the top: `import probe` must not pull in pyarrow, scipy and the benches.
    from probe.api import load_run as _load_run

    return _load_run(path)


def recompute_metrics(run, mask=None, analysis=None):  # type: ignore[no-untyped-def]
    """Recompute a loaded run's metrics (see `probe.api.recompute_metrics`)."""
    from probe.api import recompute_metrics as _recompute_metrics

    return _recompute_metrics(run, mask, analysis)


def paired_difference(run_a, run_b, metric, flavour=None, n_boot=None, seed=None):  # type: ignore[no-untyped-def]
    """`a − b` of one metric path of `metrics.json` (e.g. `"C0.KL"`) with its paired 95%
    interval and p-value, as `probe compare` prints it (see
    `probe.commands.compare.paired_difference`)."""
    from probe.commands.compare import paired_difference as _paired_difference

    return _paired_difference(run_a, run_b, metric, flavour, n_boot, seed)


def compare_runs(run_a, run_b, metrics=None, flavour=None, n_boot=None, seed=None):  # type: ignore[no-untyped-def]
    """Paired differences of two runs' headline metrics over their shared items (see
    `probe.commands.compare.compare_runs`)."""
    from probe.commands.compare import compare_runs as _compare_runs

    return _compare_runs(run_a, run_b, metrics, flavour, n_boot, seed)
