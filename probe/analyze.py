"""Recompute a run's metrics and report from its stored tables (no model).

    python -m probe.analyze RUN_DIR [analysis.KEY=VALUE ...]

With overrides the results go beside the run's own (`metrics-temperature=0.5.json`,
`report-temperature=0.5.md`); without, `metrics.json`, `report.md` and `report.html` are
rewritten from the tables.
"""

from __future__ import annotations

import sys

from probe import cli
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions
from probe.pipeline.analyze import analyze_run

USAGE = f"{__doc__}\nOptions (defaults: the values recorded in the run's manifest):\n" \
        f"{cli.options_help(AnalysisOptions, 'analysis.')}"


def _body(argv: list[str]) -> int:
    command = cli.parse(argv, "analysis.")
    if len(command.paths) != 1:
        raise ProbeInputError(f"expected one run directory, got {[str(p) for p in command.paths]}")
    metrics = analyze_run(command.paths[0], command.overrides)
    print(f"probe.analyze: analysed {metrics['n_prompts']} prompts of {command.paths[0]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probe.analyze`."""
    return cli.main("probe.analyze", USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
