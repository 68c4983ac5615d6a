"""The run directory's layout: the name of every file and folder probe keeps in a run directory,
in a shard, and in the folders a sweep report or a comparison writes. Every other module reaches
these files through the names (and the few helpers) defined here, so a file is renamed or added
in one place.

A run directory, in the order a run fills it:

    run_key.json, .lock           the results key (from the claim on) and the writer's lock
    .hydra/                       the command that ran (config and overrides)
    prompts.parquet               one row per prompt
    *.parts/                      checkpointed parts of the long passes (removed at DONE)
    scores.parquet, scores.safetensors, lens.safetensors, activations.safetensors,
    generations.parquet, judgements.parquet, patching.parquet, patching.safetensors
    manifest.json                 how the run was made (written once its answers are complete)
    metrics.json, lens_layers.json, patching.json, figures/, report.md, report.html, samples.html
    DONE                          written last: every file above is final
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from probe.errors import ProbeInputError
from probe.files import make_dirs, refuse_link, write_text

MANIFEST = "manifest.json"
RUN_KEY = "run_key.json"
"""The results key: written when a run claims its directory, compared when it resumes."""
LOCK = ".lock"
DONE = "DONE"
"""Written last: its presence means every file of the run is final."""
HYDRA_CONFIG = ".hydra/config.yaml"
HYDRA_OVERRIDES = ".hydra/overrides.yaml"
"""The command line's overrides (sweep reports compare them between runs)."""

PROMPTS = "prompts.parquet"
SCORES = "scores.parquet"
SCORE_TENSORS = "scores.safetensors"
LENS = "lens.safetensors"
ACTIVATIONS = "activations.safetensors"
GENERATIONS = "generations.parquet"
JUDGEMENTS = "judgements.parquet"
PATCHING_PAIRS = "patching.parquet"
PATCHING_TENSORS = "patching.safetensors"

SCORE_PARTS = "scores.parts"
TEXT_PARTS = "text.parts"
GENERATION_PARTS = "generations.parts"
JUDGEMENT_PARTS = "judgements.parts"
"""The verdicts asked so far (a verdict cache local to the run)."""
PATCHING_PARTS = "patching.parts"
CHECKPOINTS = (SCORE_PARTS, TEXT_PARTS, GENERATION_PARTS, JUDGEMENT_PARTS, PATCHING_PARTS)
"""The checkpoint folders of the long passes; a finished run keeps none."""
PART_INDEX = "index.json"
"""Inside a checkpoint folder: the sha256 of every complete part."""

METRICS = "metrics.json"
REPORT = "report.md"
REPORT_PAGE = "report.html"
SAMPLES_PAGE = "samples.html"
"""The per-prompt sample browser (linked from `report.html`; `python -m probe view` writes one over a sweep)."""
LENS_TABLE = "lens_layers.json"
PATCHING_TABLE = "patching.json"
FIGURES = "figures"
LENS_FIGURE = "lens.png"
PATCHING_FIGURE = "patching.png"
TEMPERATURE_FIGURE = "temperature_curve.png"

SHARD_FILES = (RUN_KEY, PROMPTS, SCORES, SCORE_TENSORS, LENS, ACTIVATIONS, GENERATIONS, JUDGEMENTS)
"""The files a shard can hold that its merge may read, checksummed at its `DONE` (its manifest
holds the checksums; `.hydra/` is the recorded command, which the merge does not read)."""
MERGED_OUTPUTS = (SCORES, LENS, ACTIVATIONS, GENERATIONS, JUDGEMENTS)
"""A shard's answers and mechanistic rows, which the merge joins (each in every shard or none)."""

SWEEP_REPORT = "report"
"""Where `python -m probe report SWEEP_DIR` writes by default (inside the sweep directory): its
`report.md`, `report.html`, figures and the summary in long format."""
SUMMARY_TABLE = "summary.parquet"
SUMMARY_CSV = "summary.csv"
COMPARISON = "compare.json"
COMPARISON_TABLE = "compare.md"
AGREEMENT = "agreement.json"
"""`python -m probe compare --out DIR`: the paired differences, or the letter-vs-generation agreement."""
OUTPUT_MARK = ".probe-output"
"""In a directory a command writes its files into (`out=DIR`, a sweep's `report/`): the name of
that command (`claim_output_dir`)."""


def metrics_file(suffix: str = "") -> str:
    """`metrics.json`, or a re-analysis's `metrics<suffix>.json` (`metrics-temperature=0.5.json`)."""
    return f"metrics{suffix}.json"


def report_files(suffix: str = "") -> tuple[str, str]:
    """`report.md` and `report.html`, or a re-analysis's `report<suffix>.md` and `.html`."""
    return f"report{suffix}.md", f"report{suffix}.html"


def is_run_dir(path: Path) -> bool:
    """Whether `path` holds a probe run: its key (from the claim on) or its manifest."""
    return (path / MANIFEST).is_file() or (path / RUN_KEY).is_file()


def is_finished(path: Path) -> bool:
    """Whether the run in `path` finished (`DONE` is there)."""
    return (path / DONE).is_file()


def mark_done(path: Path) -> None:
    """Write `DONE`: the last file of a run, a shard or a merge."""
    write_text(path / DONE, "complete\n")


def remove_checkpoints(path: Path) -> None:
    """Delete the checkpoint folders (once `DONE` is written: a kill before it recomputes nothing)."""
    for name in CHECKPOINTS:
        shutil.rmtree(path / name, ignore_errors=True)


def claim_output_dir(path: Path, command: str) -> Path:
    """`path` for `command`'s files: made if absent, else it must be empty or hold `command`'s own
    earlier output (its `OUTPUT_MARK`). Marked before anything is written, so a later call of
    the same command writes over its own files; a file, a symbolic link, or a directory holding
    anything else (a user's own `report.md`, another run) is refused with one line naming it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ProbeInputError(f"{path} is a file, not a directory; {command} writes its files into a directory: "
                              "choose a new or empty one (out=DIR)")
    make_dirs(path)
    mark = path / OUTPUT_MARK
    refuse_link(mark)
    if mark.is_file():
        owner = mark.read_text(encoding="utf-8", errors="replace").strip()
        if owner == command:
            return path
        raise ProbeInputError(f"{mark}: {path} holds the output of {owner!r}, not of {command}; it writes only into "
                              "a new or empty directory or one holding its own earlier output: choose another (out=DIR)")
    found = sorted(entry.name for entry in path.iterdir())
    if found:
        raise ProbeInputError(f"{path / found[0]}: {command} did not write this file ({path} has no {OUTPUT_MARK} "
                              "of its own), and it writes only into a new or empty directory or one holding its own "
                              "earlier output, so nothing of yours is overwritten: choose another (out=DIR)")
    write_text(mark, f"{command}\n")
    return path


def owner_mark(path: Path) -> Path:
    """The marker beside a file a command wrote into a directory it did not make
    (`.samples.html.probe-output` beside `samples.html`): it names the command (`claim_output_file`)."""
    return path.with_name(f".{path.name}{OUTPUT_MARK}")


def claim_output_file(path: Path, command: str) -> Path:
    """`path` for `command` to write, in a directory it did not make (a sweep directory, a user's
    folder): free, or holding `command`'s own earlier file (its `owner_mark`). Anything else
    there — a user's own `samples.html`, a link, a directory, another command's file — is refused
    with one line before anything is written, so no file of the user's is ever replaced."""
    path, mark = Path(path), owner_mark(Path(path))
    refuse_link(mark)
    owner = mark.read_text(encoding="utf-8", errors="replace").strip() if mark.is_file() else None
    if os.path.lexists(path) and (owner != command or os.path.islink(path) or not path.is_file()):
        whose = f"it holds {owner!r}'s output" if owner else f"{command} did not write it (no {mark.name} beside it)"
        raise ProbeInputError(f"{path} exists and {whose}; {command} never replaces a file it does not own: move it "
                              "away or write elsewhere (out=DIR)")
    if owner != command:
        write_text(mark, f"{command}\n")
    return path
