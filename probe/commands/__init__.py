"""The command lines: `probe run|analyze|compare|merge|report|view|ls` and the Hydra entry point's
helpers (config composition, override checks, run-directory callbacks). Nothing below imports
this package."""
