"""The pipeline: one run end to end (`run`), its analysis from stored tables (`analysis`, with
what it stores for the report in `analysis_outputs`; a stored run opened with its bench is
`probe.analyses.view.StoredRun`), shards (`shard_plan`, `shard_merge`) and the typed run
configuration all take (`spec`)."""
