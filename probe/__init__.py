"""probe: exact cultural-preference distributions from option-letter logits.

`import probe` stays light (no torch, no transformers); heavy modules load on use.
"""

__version__ = "0.1.0"


def load_run(path):  # type: ignore[no-untyped-def]
    """Load a run directory (see `probe.api.load_run`); imported lazily to keep `import probe` light."""
    from probe.api import load_run as _load_run

    return _load_run(path)
