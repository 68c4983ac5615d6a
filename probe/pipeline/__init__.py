"""The pipeline: one run end to end (`run`), its analysis from stored tables (`analysis`, running
the registered analyses of `probe.analyses` on the run's view, `probe.analyses.view.StoredRun`),
shards (`shard_plan`, `shard_merge`) and the typed run configuration all take (`spec`)."""
