"""The run directory on disk, the public contract for follow-up studies (docs/results/contract.md): table schemas,
streamed writers, readers, and `load_run`."""
