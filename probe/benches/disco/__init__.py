"""DiSCo (docs/benchmarks/disco.md): 4 culturally grounded options, 12 cultures, context conditions C0–C3.

`data` loads and validates the CSV and expands items into the 52-prompt design, `metrics`
computes CSD, KL, compliance, stickiness, SPD, JSD and primacy, `report` and `figures` render
them, and `task` declares all of it to the pipeline.
"""
