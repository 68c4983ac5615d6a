"""A run's prompts as per-prompt records (no model needed).

    probe export RUN_DIR [--format jsonl|csv|parquet] [--out FILE]     (default: jsonl to stdout; FILE must be new)

Each record is one prompt, in prompt-id order: its stored columns and rendered `prompt`, its
a factor run's `variant` (`{"index", "name", "levels"}`), `options` (`{label: {"group", "option"}}`),
`probabilities` (`{label: p}` at the run's analysis temperature, keyed by the labels the prompt
showed), `readings` (`expected`, `greedy`, `debiased`, `text`: each `{"letter", "group"}`;
`debiased` adds its distribution) and `verdicts` (`{"<task>.<field>": value}` of judged runs).
Undefined numbers are null. `csv` and `parquet` flatten the nested keys
(`probabilities.A`, `variant.name`). The run must be finished (DONE).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from probe.analyses.view import StoredRun
from probe.commands import cmdline
from probe.errors import ProbeInputError, printable
from probe.files import open_user_file
from probe.report.export import FORMATS, export_bytes
from probe.results.layout import is_finished, is_run_dir


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "", flags={"--format": "format", "--out": "out"})
    unknown = sorted(set(command.overrides) - {"format", "out"})
    if unknown:
        raise ProbeInputError(f"unknown option(s) {unknown}; valid: --format, --out")
    if len(command.paths) != 1:
        raise ProbeInputError(f"expected one run directory, got {[str(p) for p in command.paths]}")
    fmt = str(command.overrides.get("format", "jsonl"))
    if fmt not in FORMATS:
        raise ProbeInputError(f"--format: expected one of {list(FORMATS)}, got {fmt!r}")
    path = command.paths[0]
    if not is_finished(path):
        raise ProbeInputError(f"{path} is not a finished run (no DONE): finish it with its own command first")
    data, n = export_bytes(StoredRun.open(path), fmt)
    if "out" not in command.overrides:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        except BrokenPipeError:  # `probe export … | head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    out = Path(str(command.overrides["out"]))
    inside = next((p for p in out.absolute().parents if is_run_dir(p)), None)
    if inside is not None:
        raise ProbeInputError(f"--out {out}: inside the run directory {inside}; a run's files are its own: "
                              "write the export elsewhere")
    with open_user_file(out, "probe export") as raw:  # the one place the export reaches the disk
        raw.write(data)
    print(f"probe export: wrote {n} prompts to {printable(str(out))} ({fmt})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`probe export` (and `python -m probe export`)."""
    return cmdline.main("probe export", __doc__ or "", _body, argv)


if __name__ == "__main__":
    sys.exit(main())
