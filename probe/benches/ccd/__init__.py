"""CCD-Bench (docs/benchmarks/ccd.md): 10 options per dilemma, one per GLOBE cluster, letters A–J.

`data` loads the published JSON and builds the cyclic or Latin-square design, `metrics`
computes cluster shares, position bias, domain residuals and rationale pluralism, `report` and
`figures` render them, and `task` declares all of it to the pipeline.
"""
