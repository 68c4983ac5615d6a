"""Reports assembled from stored run files: one run's markdown and HTML page (`run`), and the
cross-run sweep report (`sweep`, `python -m probe report`)."""
