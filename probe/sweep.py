"""Cross-run aggregation: one table per benchmark (rows = runs, the papers' headline columns with
CIs), base-vs-instruct tables for model pairs present, figures and one HTML page.

    python -m probe.report multirun/2026-11-30_12-00-00            # every finished run below
    python -m probe.report runs/a runs/b --out reports/ab

Reads only `metrics.json` and `manifest.json` (and the tables for figures): no model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe.errors import ProbeInputError

DISCO_COLUMNS = [("KL", "C0.KL"), ("Gini", "C0.Gini"), ("CR(C1)", "C1.CR"), ("CR(C2)", "C2.CR"),
                 ("PSI", "C2.PSI"), ("SPD(C0)", "C0.SPD"), ("SPD(C2)", "C2.SPD"),
                 ("SPD reduction", "SPD_reduction"), ("JSD (bits)", "C3.JSD"), ("PPR", "C3.PPR"),
                 ("CSC", "C3.CSC")]
CCD_COLUMNS = [("entropy (bits)", "entropy_bits"), ("Gini", "gini"), ("position V", "position_V")]
LOCQA_COLUMNS = [("B_US", "B_US_macro"), ("|B_R − 1|", "B_R_dev_macro"), ("multiplicity", "multiplicity"),
                 ("no-answer rate", "no_answer_rate")]
COLUMNS = {"disco": DISCO_COLUMNS, "ccd": CCD_COLUMNS, "locqa": LOCQA_COLUMNS}
PAIR_METRICS = {"disco": [("KL", "C0.KL"), ("CR(C1)", "C1.CR"), ("CR(C2)", "C2.CR"), ("PSI", "C2.PSI"),
                          ("SPD(C0)", "C0.SPD"), ("SPD(C2)", "C2.SPD"), ("JSD (bits)", "C3.JSD")],
                "ccd": CCD_COLUMNS, "locqa": LOCQA_COLUMNS[:3]}


@dataclass(frozen=True)
class RunEntry:
    path: Path
    model: str
    revision: str | None
    kind: str
    pair: str | None
    bench: str
    bench_kind: str
    metrics: dict[str, Any]

    @property
    def label(self) -> str:
        return self.model if not self.revision else f"{self.model}@{self.revision}"

    @property
    def step(self) -> int:
        """Training step named by the revision (`step1000`, `stage1-step1000-tokens…`), else -1."""
        m = re.search(r"step[-_]?(\d+)", self.revision or "")
        return int(m.group(1)) if m else -1


def find_runs(paths: Sequence[Path]) -> list[Path]:
    """Finished run directories (manifest.json + metrics.json) at or below the given paths."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ProbeInputError(f"{path}: no such directory")
        candidates = [path] if (path / "manifest.json").is_file() else \
            sorted(p.parent for p in path.rglob("manifest.json"))
        found += [c for c in candidates if (c / "metrics.json").is_file() and c not in found]
    if not found:
        raise ProbeInputError(f"no finished probe runs (manifest.json + metrics.json) under {list(map(str, paths))}")
    return found


def load_entries(paths: Sequence[Path]) -> list[RunEntry]:
    """One entry per finished run, ordered by bench, model and training step."""
    entries = []
    for run in find_runs(paths):
        manifest = json.loads((run / "manifest.json").read_text())
        model = manifest["model"]
        entries.append(RunEntry(path=run, model=model["name"], revision=model.get("revision"), kind=model["kind"],
                                pair=model.get("pair"), bench=manifest["bench"]["name"],
                                bench_kind=manifest["bench"]["kind"],
                                metrics=json.loads((run / "metrics.json").read_text())))
    return sorted(entries, key=lambda e: (e.bench, e.model, e.step, e.revision or ""))


def _get(tree: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _block(e: RunEntry) -> tuple[Any, Any]:
    """The point-estimate tree and its CI tree (forced choice: `expected`; LocQA: `metrics`)."""
    if e.bench_kind == "locqa":
        return e.metrics.get("metrics"), e.metrics.get("ci95")
    return e.metrics.get("expected"), (e.metrics.get("ci95") or {}).get("expected")


def _cell(e: RunEntry, path: str) -> str:
    tree, ci_tree = _block(e)
    value, ci = _get(tree, path), _get(ci_tree, path)
    if value is None:
        return "–"
    if ci and ci[0] is not None:
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{value:.3f}"


def bench_table(entries: Sequence[RunEntry], bench_kind: str) -> str:
    """Markdown table: one row per run of this bench kind, headline metrics (expected) with CIs."""
    rows = [e for e in entries if e.bench_kind == bench_kind]
    columns = COLUMNS[bench_kind]
    extra = ["top clusters"] if bench_kind == "ccd" else []
    head = ["run", "kind", "bench"] + extra + [c for c, _ in columns]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for e in rows:
        cells = [e.label, e.kind, e.bench]
        if bench_kind == "ccd":
            shares = _get(e.metrics.get("expected"), "shares") or {}
            cells.append(", ".join(f"{c} {v:.2f}" for c, v in sorted(shares.items(), key=lambda kv: -kv[1])[:3]))
        cells += [_cell(e, path) for _, path in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pair_table(entries: Sequence[RunEntry], bench_kind: str) -> str | None:
    """Base vs instruct: both runs' metrics and the difference (instruct − base), for every
    instruct run whose configured pair also ran on the same bench; None if no pair is present."""
    by_model = {(e.model, e.bench, e.revision): e for e in entries if e.bench_kind == bench_kind}
    lines = []
    for e in entries:
        if e.bench_kind != bench_kind or e.kind != "instruct" or not e.pair:
            continue
        base = by_model.get((e.pair, e.bench, e.revision)) or next(
            (b for (m, bench, _), b in by_model.items() if m == e.pair and bench == e.bench), None)
        if base is None:
            continue
        for label, path in PAIR_METRICS[bench_kind]:
            a, b = _get(_block(e)[0], path), _get(_block(base)[0], path)
            delta = f"{a - b:+.3f}" if a is not None and b is not None else "–"
            lines.append(f"| {e.label} vs {base.label} | {label} | {_cell(e, path)} | {_cell(base, path)} | {delta} |")
    if not lines:
        return None
    return "\n".join(["| pair | metric | instruct | base | Δ (instruct − base) |", "|---|---|---|---|---|", *lines])


def sweep_markdown(entries: Sequence[RunEntry]) -> str:
    """The sweep report: per bench kind a headline table, then base-vs-instruct where pairs ran."""
    parts = [f"# probe sweep report — {len(entries)} runs", ""]
    for kind, title in (("disco", "DiSCo"), ("ccd", "CCD-Bench"), ("locqa", "LocQA")):
        if not any(e.bench_kind == kind for e in entries):
            continue
        note = ("Judged open answers, 95% bootstrap CIs over templates." if kind == "locqa" else
                "Expected (probability-weighted) metrics with 95% bootstrap CIs over items.")
        parts += [f"## {title}", "", note, "", bench_table(entries, kind), ""]
        pairs = pair_table(entries, kind)
        if pairs:
            parts += [f"### {title}: base vs instruct", "", pairs, ""]
    parts += ["## Runs", ""] + [f"- {e.label} ({e.bench}): `{e.path}`" for e in entries]
    return "\n".join(parts) + "\n"


def write_sweep_report(paths: Sequence[Path], out_dir: Path) -> Path:
    """`report.md`, figures and a self-contained `report.html` in `out_dir`; returns the HTML path."""
    from probe.api import load_run
    from probe.figures import sweep_figures
    from probe.html_report import write_html

    entries = load_entries(paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = sweep_markdown(entries)
    (out_dir / "report.md").write_text(markdown)
    figures = sweep_figures([load_run(e.path) for e in entries], [e.label for e in entries], out_dir)
    write_html(out_dir / "report.html", "probe sweep report", markdown, figures)
    return out_dir / "report.html"
