"""The registered analyses (`probe.analyses`): each unit's hooks on a tiny stored run, the
pipeline running them generically (a planted unit), and no test of a metrics section key left in
`probe/pipeline/`."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import probe_env, run_probe

from probe.analyses import registry
from probe.analyses.base import Analysis
from probe.analyses.lens import LogitLens
from probe.analyses.patching import Patching
from probe.analyses.prompt_factors import FORMAT_COLUMNS, PromptFactors
from probe.analyses.steering import Steering
from probe.analyses.temperature import TemperatureCurve
from probe.analyses.view import StoredRun
from probe.errors import ProbeInputError
from probe.files import write_json
from probe.metrics.core import AnalysisOptions
from probe.viz.markdown import OPENING_CONCLUSION

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def factor_lens_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny run that is both a factor run (two label sets) and a logit-lens run."""
    tmp = tmp_path_factory.mktemp("analyses")
    out = tmp / "run"
    proc = run_probe(["model=tiny", "bench=demo", "bench.limit=2", "bench.conditions=[C0]", "factors=[labels]",
                      "analysis.logit_lens=true", "analysis.capture_layers=[1]", "analysis.n_boot=50",
                      "progress=false", f"hydra.run.dir={out}"], cwd=REPO_ROOT, env=probe_env(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def view(factor_lens_run: Path) -> StoredRun:
    return StoredRun.open(factor_lens_run)


def test_the_registry_order_and_its_names() -> None:
    """Registry order is report order: the factor section, then the lens's and patching's; a
    second unit under a taken name is refused."""
    names = [a.name for a in registry.analyses()]
    assert names == [a.name for a in registry.BUILTIN]  # the built-in ones, in the order BUILTIN lists them
    assert names.index("format") < names.index("lens") < names.index("patching")
    assert registry.sweep_columns() == tuple(c for a in registry.BUILTIN for c in a.sweep_columns)
    assert set(FORMAT_COLUMNS) <= set(registry.sweep_columns())
    with pytest.raises(ProbeInputError, match="analysis 'lens' is already registered"):
        registry.register(LogitLens())


def test_one_run_view(factor_lens_run: Path, view: StoredRun) -> None:
    """`probe.load_run` and the analysis read a run through the same type, which carries its bench's debiasing."""
    from probe.api import load_run

    loaded = load_run(factor_lens_run)
    assert type(loaded) is StoredRun and loaded.task is view.task and loaded.debias is not None
    assert view.metrics == json.loads((factor_lens_run / "metrics.json").read_text())
    debiased = loaded.group_distribution(reading="debiased")  # the task's reading, which a plain Run lacks
    assert debiased.keys() == loaded.group_distribution().keys() and sum(debiased.values()) == pytest.approx(1.0)


def test_which_units_apply(view: StoredRun) -> None:
    applied = {a.name for a in registry.analyses() if a.applies(view)}  # a factor run with the lens, no intervention
    assert {"format", "temperature_curve", "lens"} <= applied and not {"patching", "steering"} & applied
    assert not Patching().applies(view) and not Steering().applies(view)


def test_prompt_factors_hooks(factor_lens_run: Path, view: StoredRun, tmp_path: Path) -> None:
    """compute gives `metrics.json["format"]` again; the section and the opening's answer are
    what report.md shows; the figure is drawn and on the page."""
    unit = PromptFactors()
    result = unit.compute(view, view.options())
    stored = view.metrics["format"]
    write_json(tmp_path / "format.json", result)  # as metrics.json stores it (NaN as null)
    assert result is not None and json.loads((tmp_path / "format.json").read_text()) == stored
    assert len(stored["variants"]) == len(view.manifest.raw["variants"]) >= 2
    report = (factor_lens_run / "report.md").read_text()
    section = unit.section(view, stored)
    assert section.strip() and section.strip() in report
    opened = unit.opening(view, stored, "# Title\n\nbody\n")
    answer = opened.split("\n")[2]
    assert answer.startswith(OPENING_CONCLUSION) and answer.removeprefix(OPENING_CONCLUSION).strip() in report
    figures = unit.figures(view, stored, tmp_path)
    assert len(figures) == 1 and figures[0].path.stat().st_size > 1000
    assert f'alt="{figures[0].name}"' in (factor_lens_run / "report.html").read_text()


def test_lens_hooks(factor_lens_run: Path, tmp_path: Path) -> None:
    """compute writes `lens_layers.json` as the run's analysis did; its section is report.md's."""
    copy = tmp_path / "run"
    shutil.copytree(factor_lens_run, copy)
    (copy / "lens_layers.json").unlink()
    view = StoredRun.open(copy)
    unit = LogitLens()
    table = unit.compute(view, view.options())
    assert (copy / "lens_layers.json").read_bytes() == (factor_lens_run / "lens_layers.json").read_bytes()
    assert table is not None and len(table["jsd_to_final"]) == len(table["letter_probs"]) >= 2
    assert table["jsd_to_final"][-1] == pytest.approx(0.0, abs=1e-9)  # the final layer against itself
    section = unit.section(view, table)
    assert section.startswith("\n## Logit lens (") and section in (factor_lens_run / "report.md").read_text()
    assert [f.name for f in unit.figures(view, table, tmp_path / "figures")] == ["lens.png"]


def test_temperature_curve_hook(view: StoredRun, tmp_path: Path) -> None:
    unit = TemperatureCurve()
    assert unit.compute(view, view.options()) is None and unit.section(view, None) == ""
    figures = unit.figures(view, None, tmp_path)
    assert [f.name for f in figures] == ["temperature_curve.png"] and figures[0].path.stat().st_size > 1000


def test_steering_without_steered_runs(view: StoredRun, tmp_path: Path) -> None:
    """No steered run among the entries: no sweep block and no figure (the dose–response itself
    is checked in the steering tests)."""
    unit = Steering()
    assert unit.sweep_section([view], view.task) is None and unit.sweep_figures([view], tmp_path) == []


class Planted(Analysis):
    """A unit the pipeline has never heard of: the number of prompts, in metrics and in the report."""

    name = "planted"
    in_metrics = True

    def applies(self, view: StoredRun) -> bool:
        return True

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        return {"n_prompts": view.prompts.num_rows, "temperature": opts.temperature}

    def section(self, view: StoredRun, result: dict[str, Any] | None) -> str:
        return f"\n## Planted\n\n{result}\n"


class PlantedFiles(Planted):
    """A unit that keeps its own file: only in a run's own analysis."""

    name = "planted_files"
    in_metrics = False

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        (view.path / "planted.json").write_text("{}")
        return {"files": 1}


def test_the_pipeline_runs_any_registered_unit(factor_lens_run: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered unit's result lands in metrics.json under its name and its section ends the
    report; a re-analysis with overrides runs only the units whose result is a metrics section."""
    from probe.pipeline.analysis import analyze_run

    copy = tmp_path / "run"
    shutil.copytree(factor_lens_run, copy)
    monkeypatch.setattr(registry, "_ANALYSES", [*registry._ANALYSES, Planted(), PlantedFiles()])
    metrics = analyze_run(copy)
    n = StoredRun.open(copy).prompts.num_rows
    assert metrics["planted"] == {"n_prompts": n, "temperature": 1.0} and "planted_files" not in metrics
    report = (copy / "report.md").read_text()
    assert report.endswith(f"\n## Planted\n\n{metrics['planted']}\n\n## Planted\n\n{{'files': 1}}\n")
    assert (copy / "planted.json").is_file()
    (copy / "planted.json").unlink()
    again = analyze_run(copy, {"temperature": 0.5})
    assert again["planted"]["temperature"] == 0.5 and not (copy / "planted.json").exists()
    assert "{'files': 1}" not in (copy / "report-temperature=0.5.md").read_text()


def metrics_key_tests(source: str, names: set[str]) -> list[str]:
    """Each test of a metrics.json section key in `source`: `"k" in <…metrics…>`, a registered
    analysis's name tested (`"lens" in x`), or its section read from metrics (`metrics["lens"]`,
    `metrics.get("lens")`). A tensor file's `"lens"` array is no metrics section."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            key = node.left.value if isinstance(node.left, ast.Constant) else None
            if key in names or (isinstance(key, str) and "metrics" in ast.unparse(node.comparators[0])):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if key in names and "metrics" in ast.unparse(node.value):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if key in names and "metrics" in ast.unparse(node.func.value):
                found.append(ast.unparse(node))
    return found


def test_no_metrics_section_key_in_the_pipeline() -> None:
    names = {a.name for a in registry.analyses()}
    planted = ('if "format" in x:\n    a = metrics["lens"]\nb = "k" in stored.metrics\n'
               'c = run.metrics.get("patching")\nd = tensors["lens"]\n')
    assert sorted(metrics_key_tests(planted, names)) == sorted([  # the check can fail
        "'format' in x", "metrics['lens']", "'k' in stored.metrics", "run.metrics.get('patching')"])
    found = {str(p.relative_to(REPO_ROOT)): metrics_key_tests(p.read_text(), names)
             for p in sorted((REPO_ROOT / "probe" / "pipeline").glob("*.py"))}
    assert {p: f for p, f in found.items() if f} == {}
