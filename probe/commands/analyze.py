"""Recompute a run's metrics and report from its stored tables (no model).

    python -m probe analyze RUN_DIR [analysis.KEY=VALUE ...]

With overrides the results go beside the run's own (`metrics-temperature=0.5.json`,
`report-temperature=0.5.md`, `report-temperature=0.5.html`); without, `metrics.json`,
`report.md` and `report.html` are rewritten from the tables. Either way the headline metrics
are printed.
"""

from __future__ import annotations

import sys

from probe.commands import cmdline
from probe.benches.registry import task_of
from probe.errors import ProbeInputError, printable
from probe.metrics.core import AnalysisOptions
from probe.pipeline.analysis import analyze_run, suffix_of
from probe.report.summary import run_summary
from probe.results.layout import metrics_file, report_files
from probe.results.manifest import read_manifest

USAGE = f"{__doc__}\nOptions (defaults: the values recorded in the run's manifest):\n" \
        f"{cmdline.options_help(AnalysisOptions, 'analysis.')}"


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "analysis.")
    if len(command.paths) != 1:
        raise ProbeInputError(f"expected one run directory, got {[str(p) for p in command.paths]}")
    run_dir = command.paths[0]
    metrics = analyze_run(run_dir, command.overrides)
    task = task_of(read_manifest(run_dir))
    options = "".join(f", analysis.{k}={v}" for k, v in sorted(command.overrides.items()))
    suffix = suffix_of(command.overrides)
    markdown, page = report_files(suffix)
    head = printable(f"{metrics['n_prompts']} prompts of {run_dir}{options}")
    print(f"probe analyze: {head}\n"
          f"{run_summary(task, metrics)}\nprobe analyze: wrote {metrics_file(suffix)}, {markdown} and {page}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probe analyze`."""
    return cmdline.main("probe analyze", USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
