"""probe: exact cultural-preference distributions from option-letter logits.

`import probe` stays light (no torch, no transformers); heavy modules load on use.
"""

__version__ = "0.1.0"
