"""Run and sweep figures from stored run directories, and the self-contained HTML report."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ccd_items, disco_rows, run_probe, write_csv, write_json_file

from probe.analyses.temperature import temperature_curve
from probe.analyses.view import StoredRun
from probe.api import load_run
from probe.benches.ccd.figures import CAPTIONS as CCD_CAPTIONS
from probe.benches.ccd.figures import position_cluster_rates
from probe.benches.disco.figures import CAPTIONS as DISCO_CAPTIONS
from probe.benches.registry import task_of
from probe.report.sweep import sweep_figures
from probe.viz.figures import Figure
from probe.viz.html import caption_html, markdown_to_html, write_html

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

CAPTIONS = {**DISCO_CAPTIONS, **CCD_CAPTIONS}


def run_figures(run_dir: Path, out_dir: Path) -> list[Figure]:
    """A stored run's figures, as its bench's task draws them."""
    run = load_run(run_dir)
    return task_of(run.manifest).scoring.figures(run, out_dir)

REPO_ROOT = Path(__file__).resolve().parents[2]
DISCO_FIGURES = ["csd.png", "lorenz.png", "letter_positions.png", "ppr_by_rotation.png"]
CCD_FIGURES = ["cluster_shares.png", "position_cluster_heatmap.png"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four tiny runs: DiSCo (all conditions) and CCD-Bench (cyclic), each with tiny and tiny-gemma3."""
    tmp = tmp_path_factory.mktemp("figruns")
    env = {**os.environ, "PROBE_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    disco = write_csv(tmp / "DiSCo Bench.csv", disco_rows(4))
    ccd = write_json_file(tmp / "CCD-Bench.json", ccd_items(7))
    out = {}
    for model in ("tiny", "tiny-gemma3"):
        for bench, path in (("disco", disco), ("ccd", ccd)):
            out[f"{bench}-{model}"] = tmp / f"{bench}-{model}"
            proc = run_probe([f"model={model}", f"bench={bench}",
                                   f"bench.path={path}", f"hydra.run.dir={out[f'{bench}-{model}']}",
                                   "analysis.n_boot=50", "progress=false"],
                                  cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > 1024, path


def test_disco_run_figures(runs: dict[str, Path], tmp_path: Path) -> None:
    figs = run_figures(runs["disco-tiny"], tmp_path)
    assert [f.name for f in figs] == DISCO_FIGURES
    for f in figs:
        assert f.path == tmp_path / f.name and f.caption == CAPTIONS[f.name]
        assert_png(f.path)


def test_ccd_run_figures(runs: dict[str, Path], tmp_path: Path) -> None:
    figs = run_figures(runs["ccd-tiny"], tmp_path)
    assert [f.name for f in figs] == CCD_FIGURES
    for f in figs:
        assert_png(f.path)


def test_ccd_report_opens_with_its_conclusion_in_both_readings(runs: dict[str, Path]) -> None:
    m = json.loads((runs["ccd-tiny"] / "metrics.json").read_text())
    first = (runs["ccd-tiny"] / "report.md").read_text().split("\n")[2]
    for block, head in (("expected", "Expected reading (probability-weighted picks)"),
                        ("debiased", "Debiased reading (letter prior removed)")):
        shares, gini = m[block]["shares"], m[block]["gini"]
        top = max(shares, key=shares.get)
        assert f"{head}: the picks spread " in first and f"(Gini {gini:.3f} [" in first
        assert f"most {top} {shares[top]:.3f}" in first
    assert first.startswith("**In short:** Expected reading")


def test_position_cluster_rates_match_metrics(runs: dict[str, Path]) -> None:
    """Cyclic design: every cluster is shown once per item at every position, so the mean over
    clusters of the choice rate at ℓ is the position share and the mean over positions of a
    cluster's rate is its share."""
    run = load_run(runs["ccd-tiny"])
    rate, clusters = position_cluster_rates(run)
    assert rate.shape == (10, 10) and np.isfinite(rate).all()
    m = run.metrics["expected"]
    np.testing.assert_allclose(rate.mean(axis=0), m["position_shares"], atol=1e-6)
    np.testing.assert_allclose(rate.mean(axis=1), [m["shares"][c] for c in clusters], atol=1e-6)


def test_missing_metrics_skip_figures(runs: dict[str, Path], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(runs["disco-tiny"], run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for block in (metrics["expected"], metrics["ci95"]["expected"]):
        for condition in ("C1", "C2", "C3"):
            block.pop(condition)
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    names = [f.name for f in run_figures(run_dir, tmp_path / "c0")]
    assert names == ["csd.png", "lorenz.png", "letter_positions.png"]
    metrics.update({"expected": None, "greedy": None, "ci95": {}})  # a generation run with no valid answer
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    assert run_figures(run_dir, tmp_path / "none") == []


def test_sweep_figures(runs: dict[str, Path], tmp_path: Path) -> None:
    keys = ["disco-tiny", "disco-tiny-gemma3", "ccd-tiny", "ccd-tiny-gemma3"]
    figs = sweep_figures([load_run(runs[k]) for k in keys], ["tiny", "tiny-gemma3"] * 2, tmp_path)
    assert [f.name for f in figs] == ["csd_heatmap.png", "lorenz_models.png", "sl_vs_psi.png",
                                      "ccd_shares_models.png", "symkl_dendrogram.png"]
    for f in figs:
        assert_png(f.path)
    one_ccd = sweep_figures([load_run(runs["ccd-tiny"])], ["tiny"], tmp_path / "one")
    assert [f.name for f in one_ccd] == ["ccd_shares_models.png"]
    assert sweep_figures([], [], tmp_path / "empty") == []
    with pytest.raises(ValueError, match="labels"):
        sweep_figures([load_run(runs["ccd-tiny"])], [], tmp_path)


@pytest.mark.parametrize("key", ["disco-tiny", "ccd-tiny"])
def test_temperature_curve(runs: dict[str, Path], tmp_path: Path, key: str) -> None:
    run = load_run(runs[key])
    fig = temperature_curve(StoredRun.of(run, task_of(run.manifest)), [0.5, 1.0, 2.0], tmp_path)
    assert fig is not None and fig.name == "temperature_curve.png"
    assert_png(fig.path)
    with pytest.raises(ValueError, match="positive"):
        temperature_curve(StoredRun.of(run, task_of(run.manifest)), [0.0, 1.0], tmp_path)


MARKDOWN = """# Report <b>title</b>

Intro with `code <x>` and <script>alert(1)</script> & more,
continued on a second line.

> **Warning:** a quoted <b>group</b>:
> - first detail
> - second detail

## Table

| metric | value |
|---|---|
| KL | 0.123 |
| A & B \\| <b>C</b> | [0.1, 0.2] |

- first item
- second **bold**
"""


def test_markdown_conversion() -> None:
    body = markdown_to_html(MARKDOWN)
    assert "<h1>Report &lt;b&gt;title&lt;/b&gt;</h1>" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more,\ncontinued on a second line.</p>" in body
    assert "<script>" not in body and "<b>" not in body  # data never becomes markup
    assert "<code>code &lt;x&gt;</code>" in body
    # a blockquote with its list, not a literal `>` opening a paragraph
    assert ("<blockquote>\n<p><strong>Warning:</strong> a quoted &lt;b&gt;group&lt;/b&gt;:</p>\n<ul>\n"
            "<li>first detail</li>\n<li>second detail</li>\n</ul>\n</blockquote>") in body
    assert not re.search(r"<p>\s*&gt;", body)
    assert re.search(r"<table>\s*<thead>\s*<tr>\s*<th>metric</th>\s*<th>value</th>\s*</tr>\s*</thead>", body)
    assert '<td class="num">0.123</td>' in body and '<td class="num">[0.1, 0.2]</td>' in body
    assert "<td>A &amp; B | &lt;b&gt;C&lt;/b&gt;</td>" in body  # an escaped pipe stays in its cell
    assert "<ul>\n<li>first item</li>\n<li>second <strong>bold</strong></li>\n</ul>" in body
    assert "<img" not in markdown_to_html("![remote](https://example.org/x.png)")  # images are off: nothing loads


@pytest.fixture(scope="module")
def report(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Figure]]:
    out = tmp_path_factory.mktemp("html")
    figs = run_figures(runs["disco-tiny"], out) + run_figures(runs["ccd-tiny"], out / "ccd")
    md = (runs["disco-tiny"] / "report.md").read_text() + "\n" + MARKDOWN
    write_html(out / "report.html", "probe <report>", md, figs)
    return out / "report.html", figs


def test_html_self_contained(report: tuple[Path, list[Figure]]) -> None:
    path, figs = report
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<title>probe &lt;report&gt;</title>" in text
    for f in figs:
        uri = "data:image/png;base64," + base64.b64encode(f.path.read_bytes()).decode("ascii")
        assert f'<img src="{uri}" alt="{f.name}"><figcaption>' in text
        # the caption rendered as inline markdown (code spans as <code>, never literal backticks)
        assert f"<figcaption>{caption_html(f.caption)}</figcaption>" in text
    assert not re.search(r"<figcaption>[^<]*`", text)
    assert text.count("<img ") == len(figs) == 6
    assert text.count("<script>") == 1  # ours; the markdown's is escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<table>" in text
    assert not re.search(r"""(src|href)=["'](?!data:)""", text)  # no external resources


@pytest.mark.slow
def test_html_renders_in_chromium(report: tuple[Path, list[Figure]], tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium not installed (CI installs Debian's chromium)")
    path, figs = report
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                           path.resolve().as_uri()], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f'data-images-loaded="{len(figs)}"' in proc.stdout, proc.stdout[:500]
