"""LocQA (docs/benchmarks/locqa.md): open questions in 12 languages, one gold answer per locale.

`data` loads and validates the published JSON and builds the prompts of each mode,
`judging` says what the judge is asked and holds the offline `rules` judge (its string
matching in `rules`), `metrics` computes global and regional bias and the
taxonomy, `report` and `figures` render them, and `task` declares all of it to the pipeline.
"""
