"""The pipeline: one run end to end (`run`), its analysis from stored tables (`analysis`, with
what it stores for the report in `analysis_outputs`), stored runs opened with their bench
(`stored_run`), shards (`shard_plan`, `shard_merge`) and the typed run configuration all take
(`spec`)."""
