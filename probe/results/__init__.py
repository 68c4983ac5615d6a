"""The run directory on disk, the public contract for follow-up studies (SPEC §6): table schemas,
streamed writers, readers, and `load_run`."""
