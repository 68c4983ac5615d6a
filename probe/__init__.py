"""probe: exact cultural-preference distributions from option-letter logits.

`import probe` stays light (no torch, no transformers): the API loads on first use.
"""

from probe.version import __version__

__all__ = ["__version__", "load_run", "recompute_metrics"]


def load_run(path):  # type: ignore[no-untyped-def]
    """Load a run directory (see `probe.api.load_run`)."""
    # Imported here, not at the top: `import probe` must not pull in pyarrow, scipy and the benches.
    from probe.api import load_run as _load_run

    return _load_run(path)


def recompute_metrics(run, mask=None, analysis=None):  # type: ignore[no-untyped-def]
    """Recompute a loaded run's metrics (see `probe.api.recompute_metrics`)."""
    from probe.api import recompute_metrics as _recompute_metrics

    return _recompute_metrics(run, mask, analysis)
