"""Scoring backends: rendered token ids in, full-vocabulary letter log-probs (or generated text) out.

Every backend implements `base.LetterBackend` (letter mode) and `base.Generator` (generation
mode, and the LLM judge's `chat`); the pipeline streams their batches to disk. `factory`
chooses one by its spec (`backend=hf`); vLLM imports its library only when chosen, with an
install hint when missing. `specs`, `batching` and `prefix` need no torch.
"""
