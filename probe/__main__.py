"""`probe` (= `python -m probe`): one command, subcommands.

    probe [run] model=<name> bench=<name> [overrides]   # score a bench (Hydra; `-m` for sweeps)
    probe analyze RUN_DIR [analysis.KEY=VALUE ...]      # recompute metrics and report, no model
    probe compare RUN_A RUN_B [--out DIR]               # paired differences over shared items
    probe merge --out DIR SHARD_RUN ...                 # shard runs → one run directory
    probe report MULTIRUN_DIR [RUN_DIR ...] [out=DIR]   # sweep tables, figures, one HTML page
    probe view RUN_OR_SWEEP_DIR [out=DIR]               # every prompt as the model saw it
    probe ls [GROUP]                                    # what there is to run
    probe runs [DIR]                                    # past runs: bench, model, status, headline
    probe export RUN_DIR [--format jsonl|csv|parquet] [--out FILE]   # one record per prompt
    probe --version                                     # probe's version

Subcommands are dispatched here, before Hydra, whose grammar would read `analyze` as a bad
override; each one imports only what it needs and has its own `--help`.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, str] = {name: f"probe.commands.{name}"
                               for name in "run analyze compare merge report view ls runs export".split()}
"""Subcommand → the module whose `main(argv)` runs it."""


def main() -> None:
    """Dispatch `probe SUBCOMMAND …`; anything else is a run's overrides (`probe model=… bench=…`)."""
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-V"]):  # probe's own, before Hydra (whose --version is Hydra's)
        from probe.version import __version__

        print(f"probe {__version__}")
        return
    name = argv[0] if argv and argv[0] in SUBCOMMANDS else "run"
    rest = argv[1:] if argv[:1] == [name] else argv
    if name == "run" and argv[:1] in (["-h"], ["--help"]):
        print(__doc__)  # the subcommands first; `probe run --help` describes every key of a run
    module = importlib.import_module(SUBCOMMANDS[name])
    code = module.main(rest)
    sys.exit(int(code or 0))


if __name__ == "__main__":
    main()
