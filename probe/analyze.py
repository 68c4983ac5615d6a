"""Recompute `metrics.json` and `report.md` of a run directory from its stored tables.

    python -m probe.analyze runs/demo/smollm2-135m/2026-11-30_12-00-00 [analysis.temperature=0.7]

Needs no model: everything is read from `prompts.parquet`, `scores.parquet` and the manifest.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches import OPEN_ANSWER_KINDS, get_bench
from probe.errors import ProbeInputError
from probe.generation import pluralism, read_generation_table
from probe.mech import split_analysis
from probe.results import read_prompts, read_table, write_json


def analyze_run(run_dir: Path, analysis: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics from the stored tables, write `metrics.json` and `report.md`, return metrics.

    `analysis` overrides the analysis options recorded in the manifest (e.g. a temperature);
    the results then go to `metrics-<key>=<value>.json` and `report-….md` beside the originals.
    """
    t0 = time.perf_counter()
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise ProbeInputError(f"{run_dir}: no manifest.json; not a probe run directory")
    manifest = json.loads(manifest_path.read_text())
    _, opts = split_analysis({**manifest.get("analysis", {}), **dict(analysis or {})})
    if manifest["bench"]["kind"] in OPEN_ANSWER_KINDS:
        return _analyze_locqa(run_dir, manifest, opts, analysis, t0)
    bench = get_bench(manifest["bench"]["kind"])
    generated = manifest["backend"].get("mode") == "generate"
    metrics: dict[str, Any] = {"bench": manifest["bench"]["name"], "model": manifest["model"]["name"]}
    if generated:
        table, invalid = read_generation_table(run_dir, manifest["letters"])
        n_prompts = len(table.prompt_id) + len(invalid)
        metrics.update({"n_items": int(len(np.unique(read_prompts(run_dir).item_id.astype(str)))),
                        "n_prompts": n_prompts, "mode": "generate",
                        "invalid_rate": len(invalid) / n_prompts if n_prompts else float("nan"),
                        "n_invalid": len(invalid)})
    else:
        table = read_table(run_dir)
        mass = np.exp(table.logprobs.astype(np.float64)).sum(axis=1)
        metrics.update({
            "n_items": int(len(np.unique(table.item_id.astype(str)))),
            "n_prompts": int(len(table.prompt_id)),
            "letter_mass": {"mean": float(mass.mean()), "share_below_half": float((mass < 0.5).mean())},
            "greedy_valid_rate": float(table.greedy_valid.mean()),
        })
    metrics.update({
        "temperature": float(opts.get("temperature", 1.0)),
        "bootstrap": {"n_boot": int(opts.get("n_boot", 5000)), "seed": int(opts.get("seed", 0)), "unit": "item"},
    })
    if len(table.prompt_id):
        metrics.update(bench.metrics(table, opts, manifest["bench"].get("config", {})))
    else:  # every generation invalid: nothing to aggregate, which the report says
        metrics.update({"expected": None, "greedy": None, "ci95": {}})
    if generated:
        plural = pluralism(run_dir)
        if plural is not None:
            metrics["pluralism"] = plural
    report = bench.report(metrics) if metrics["expected"] is not None else (
        f"# {metrics['bench']} — {metrics['model']}\n\nNo valid answers: all {metrics['n_prompts']} "
        "generations were unparseable, so no metric is defined.\n")
    if generated:
        report += invalid_section(invalid)
    if (run_dir / "lens.safetensors").is_file() and not suffix_of(analysis):
        report += lens_section(run_dir, "C0" if manifest["bench"]["kind"] == "disco" else None)
    # Overrides are a re-analysis: written beside the run's own metrics, never over them.
    suffix = suffix_of(analysis)
    write_json(run_dir / f"metrics{suffix}.json", metrics)
    (run_dir / f"report{suffix}.md").write_text(report)
    if not suffix:
        _html_report(run_dir, f"{metrics['bench']} — {metrics['model']}", report)
    if not suffix:
        manifest.setdefault("timings", {})["analysis_s"] = time.perf_counter() - t0
        write_json(manifest_path, manifest)
    return metrics


TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


def _html_report(run_dir: Path, title: str, markdown: str) -> None:
    """`report.html`: the markdown report with the run's figures (and the lens figure) embedded,
    and the headline metrics recomputed over a range of sampling temperatures."""
    from probe.api import load_run
    from probe.figures import Figure, run_figures, temperature_curve
    from probe.html_report import write_html

    figures = run_figures(run_dir, run_dir / "figures")
    if figures:
        curve = temperature_curve(load_run(run_dir), TEMPERATURES, run_dir / "figures")
        figures += [curve] if curve is not None else []
    if (run_dir / "lens.png").is_file():
        figures.append(Figure("lens.png", run_dir / "lens.png", "Logit lens: the culture distribution and the "
                              "letter-position probabilities read out after every layer."))
    write_html(run_dir / "report.html", title, markdown, figures)


def _analyze_locqa(run_dir: Path, manifest: dict[str, Any], opts: dict[str, Any],
                   analysis: Mapping[str, Any] | None, t0: float) -> dict[str, Any]:
    from probe import locqa_run

    metrics: dict[str, Any] = {"bench": manifest["bench"]["name"], "model": manifest["model"]["name"],
                               "n_items": manifest["bench"]["n_items"], "n_prompts": manifest["bench"]["n_prompts"],
                               "mode": manifest["bench"]["mode"],
                               "bootstrap": {"n_boot": int(opts.get("n_boot", 5000)), "seed": int(opts.get("seed", 0)),
                                             "unit": "template"}}
    metrics.update(locqa_run.metrics(run_dir, manifest, opts))
    suffix = suffix_of(analysis)
    write_json(run_dir / f"metrics{suffix}.json", metrics)
    report = locqa_run.report(metrics)
    (run_dir / f"report{suffix}.md").write_text(report)
    if not suffix:
        from probe.html_report import write_html

        write_html(run_dir / "report.html", f"{metrics['bench']} — {metrics['model']}", report, [])
        manifest.setdefault("timings", {})["analysis_s"] = time.perf_counter() - t0
        write_json(run_dir / "manifest.json", manifest)
    return metrics


def suffix_of(analysis: Mapping[str, Any] | None) -> str:
    return "".join(f"-{k}={v}" for k, v in sorted((analysis or {}).items()))


def lens_section(run_dir: Path, condition: str | None) -> str:
    """Per-layer table and figure (`lens.png`, `lens_layers.json`) of the logit lens."""
    from probe.api import load_run
    from probe.lens import layer_table, plot_layers

    table = layer_table(load_run(run_dir), condition)
    write_json(run_dir / "lens_layers.json", table)
    plot_layers(table, run_dir / "lens.png")
    lines = ["", f"## Logit lens ({condition or 'all prompts'}; figure: lens.png)", "",
             "| layer | JSD to final (bits) | top group | " + " | ".join(f"P({x})" for x in table["letters"]) + " |",
             "|---" * (3 + len(table["letters"])) + "|"]
    for i, (csd, letters, jsd) in enumerate(zip(table["csd"], table["letter_probs"], table["jsd_to_final"])):
        top = max(csd, key=csd.get)
        lines.append(f"| {i} | {jsd:.4f} | {top} {csd[top]:.3f} | " + " | ".join(f"{p:.3f}" for p in letters) + " |")
    return "\n".join(lines) + "\n"


def invalid_section(invalid: list[dict[str, Any]], show: int = 20) -> str:
    """Markdown list of unparseable generations (never dropped silently)."""
    lines = ["", f"## Invalid generations ({len(invalid)})", ""]
    for g in invalid[:show]:
        lines.append(f"- prompt {g['prompt_id']}: `{g['text'][:120].replace(chr(10), ' ').replace('`', chr(39))}`")
    if len(invalid) > show:
        lines.append(f"- … {len(invalid) - show} more in generations.parquet (parsed_letter is null)")
    return "\n".join(lines) + "\n"


def _parse_overrides(args: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key.startswith("analysis."):
            raise ProbeInputError(f"expected overrides like analysis.temperature=0.5, got {arg!r}")
        out[key.removeprefix("analysis.")] = json.loads(value) if value[:1] in "[{" else _number(value)
    return out


def _number(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    try:
        metrics = analyze_run(Path(argv[0]), _parse_overrides(argv[1:]))
    except ProbeInputError as e:
        print(f"probe.analyze: error: {e}", file=sys.stderr)
        return 2
    print(f"analysed {metrics['n_prompts']} prompts of {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
