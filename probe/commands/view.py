"""The per-prompt sample browser: one static, self-contained HTML page over every finished run
at or below the given directory.

    python -m probe view RUN_OR_SWEEP_DIR [out=DIR]      (also: probe view …, --out DIR)

Writes `samples.html` into the directory (or `out`): filter by bench, condition, group,
verdict and letter mass (filters can be set in the URL fragment:
`samples.html#condition=C0&group=Assam&mass_max=0.5`), click a prompt to see it beside its
letter probabilities, answer and verdicts. Every run also writes its own `samples.html`, linked
from its `report.html`. No model, no network.
"""

from __future__ import annotations

from pathlib import Path

from probe.commands import cmdline
from probe.errors import ProbeInputError, printable
from probe.files import make_dirs
from probe.report.entries import find_runs
from probe.benches.registry import task_of
from probe.results.layout import MANIFEST, SAMPLES_PAGE, claim_output_dir, claim_output_file
from probe.results.run import Run, load_run
from probe.types import Design
from probe.viz.samples import SampleSet, sample_set, write_samples_html


COMMAND = "probe view"
"""Whose output a directory `probe view` writes into holds (`claim_output_dir`, `claim_output_file`)."""


def write_view(path: Path, out_dir: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the sample browser over the finished runs at or below `path` into `out_dir`
    (default `path`; another directory must be new, empty or hold an earlier page of this
    command: `claim_output_dir`; `path` itself, when it is no run, may hold no `samples.html` but
    this command's own: `claim_output_file`); returns the page and the unfinished runs left out."""
    runs, unfinished = find_runs([path])
    root = path if (path / MANIFEST).is_file() else None
    sets = [_samples(load_run(run), _label(run, path, root)) for run in runs]
    if out_dir is not None and Path(out_dir).resolve() != Path(path).resolve():
        page = claim_output_dir(Path(out_dir), COMMAND) / SAMPLES_PAGE
    elif root is not None:
        page = make_dirs(Path(path)) / SAMPLES_PAGE  # a run's own page: a file of the run's layout
    else:  # a sweep's or a user's folder: its page only where no file of theirs is
        page = claim_output_file(Path(path) / SAMPLES_PAGE, COMMAND)
    title = f"probe samples — {path.resolve().name}"
    return write_samples_html(page, title, sets), unfinished


def _samples(run: Run, label: str) -> SampleSet:
    """A run's samples, its condition and target columns as its bench's design names them."""
    try:
        design = task_of(run.manifest).design
    except ProbeInputError:  # a plugin bench not importable here: its prompts are still worth showing
        design = Design()
    return sample_set(run, label, design)


def _label(run: Path, path: Path, root: Path | None) -> str:
    """A run's name on the page: its directory relative to the sweep (the directory name alone
    for a single run)."""
    return run.name if root is not None else str(run.relative_to(path))


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "", flags={"--out": "out"})
    unknown = sorted(set(command.overrides) - {"out"})
    if unknown:
        raise ProbeInputError(f"unknown option(s) {unknown}; valid: ['out']")
    if len(command.paths) != 1:
        raise ProbeInputError(f"expected one run or sweep directory, got {len(command.paths)}")
    out = Path(str(command.overrides["out"])) if "out" in command.overrides else None
    page, unfinished = write_view(command.paths[0], out)
    for run in unfinished:
        print(f"probe view: skipped {printable(str(run))} (unfinished: no DONE)")
    print(f"probe view: wrote {printable(str(page))}")
    return 0


def main(argv: list[str] | None = None) -> None:
    """`python -m probe view` (and `probe view`): exits 2 with one line on bad input."""
    code = cmdline.main("probe view", __doc__ or "", _body, argv)
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
