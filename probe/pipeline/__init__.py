"""The pipeline: one run end to end (`run`), re-analysis from stored tables (`analyze`), and
the typed run configuration both take (`spec`)."""
