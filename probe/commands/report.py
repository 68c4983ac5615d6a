"""The sweep report: per-bench tables with CIs, base-vs-instruct pairs, figures, one HTML page.

    python -m probe report MULTIRUN_DIR [RUN_DIR ...] [out=DIR]     (also: --out DIR)

Every finished run (with `DONE`) at or below the given paths is included; unfinished ones are
listed as skipped. `out` defaults to `<first path>/report`.
"""

from __future__ import annotations

from pathlib import Path

from probe.commands import cmdline
from probe.errors import ProbeInputError, printable
from probe.report.sweep import write_sweep_report
from probe.results.layout import REPORT, SWEEP_REPORT


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "", flags={"--out": "out"})
    unknown = sorted(set(command.overrides) - {"out"})
    if unknown:
        raise ProbeInputError(f"unknown option(s) {unknown}; valid: ['out']")
    if not command.paths:
        raise ProbeInputError("expected a multirun directory and/or run directories")
    out = Path(str(command.overrides["out"])) if "out" in command.overrides else command.paths[0] / SWEEP_REPORT
    html = write_sweep_report(command.paths, out)
    print(printable(f"probe report: wrote {html} and {out / REPORT}"))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probe report`."""
    return cmdline.main("probe report", __doc__ or "", _body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
