"""Every registered task's table and curve columns resolve in its own real metrics: one tiny run
of each bench kind (each mode included), every column path looked up in what `Scoring.headline`
returns and every custom cell rendered. A column naming a path the bench's metrics never hold
would otherwise show `–` in every sweep table, footnoted as "not computed"."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, ccd_items, run_probe, shared_dir, write_json_file

from probe.benches.registry import tasks
from probe.benches.task import Column, Task

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

BASE = ["model=tiny", "analysis.n_boot=20", "progress=false"]


def _bench_args(kind: str, tmp: Path) -> list[str]:
    """The tiny run of `kind`: the packaged demo, a made-up CCD file, the reference folder's data."""
    if kind == "disco":
        return ["bench=demo", "bench.limit=2"]
    if kind == "ccd":
        return ["bench=ccd", f"bench.path={write_json_file(tmp / 'ccd.json', ccd_items(2))}"]
    if kind == "opinionqa":
        from opinionqa_files import write_wave

        return ["bench=opinionqa", f"bench.path={write_wave(tmp / 'wave')}", "bench.personas=[portray]",
                "bench.attributes=[SEX]"]
    root = shared_dir()
    if root is None:
        pytest.skip("the LocQA, BLEnD and GlobalOpinionQA files need $PROBE_SHARED_DIR/data")
    data = root / "data"
    return {
        "locqa": ["bench=locqa", f"bench.path={data / 'locqa' / 'locqa.json'}", "judge=rules",
                  "backend.max_new_tokens=4", "bench.limit=1"],
        "blend": ["bench=blend", f"bench.path={data / 'blend'}", "bench.limit=2", "backend.max_new_tokens=4",
                  "bench.countries=[US,UK]"],
        "blend_whose": ["bench=blend", f"bench.path={data / 'blend'}", "bench.mode=whose_answer",
                        "backend.mode=text", "bench.limit=2"],
        "globalopinion": ["bench=globalopinion", f"bench.path={data / 'globalopinion' / 'global_opinions_subset.csv'}",
                          "bench.limit=6"],
    }[kind]


@pytest.fixture(scope="module")
def metrics_of(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, dict[str, Any]]:
    """`metrics.json` of one tiny run per registered kind (run on first use)."""
    tmp = tmp_path_factory.mktemp("hooks")
    env = {**os.environ, "PROBE_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    done: dict[str, dict[str, Any]] = {}

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, kind: str) -> dict[str, Any]:
            out = tmp / kind
            proc = run_probe([*BASE, *_bench_args(kind, tmp), f"hydra.run.dir={out}"], cwd=TESTS.parent, env=env)
            assert proc.returncode == 0, proc.stderr[-3000:]
            done[kind] = json.loads((out / "metrics.json").read_text())
            return done[kind]

    return Lazy()


def _resolve(tree: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path; a missing key fails with the path walked so far."""
    node: Any = tree
    for i, key in enumerate(path.split(".")):
        assert isinstance(node, Mapping) and key in node, (
            f"{path}: no {key!r} under {'.'.join(path.split('.')[:i]) or 'the headline'}; "
            f"keys there: {sorted(node) if isinstance(node, Mapping) else type(node).__name__}")
        node = node[key]
    return node


@pytest.mark.parametrize("task", tasks(), ids=lambda t: t.kind)
def test_every_column_resolves_in_the_bench_s_real_metrics(task: Task, metrics_of: Mapping[str, Any]) -> None:
    metrics = metrics_of[task.kind]
    assert metrics["bench"] and task.scoring.headline(metrics)  # the run is this task's
    tree = task.scoring.headline(metrics)[0]
    p = task.presentation
    columns: list[Column] = [*p.sweep_columns, *p.pair_columns, *p.curve_metrics]
    assert columns
    resolved = 0
    for column in columns:
        if column.cell is not None:  # a custom cell reads the whole metrics.json and must render text
            text = column.cell(metrics)
            assert isinstance(text, str) and text, column.label
            continue
        if column.optional and not _has(tree, column.path):  # a reading this run did not make
            continue
        value = _resolve(tree, column.path)
        assert value is None or isinstance(value, (int, float, list, dict)), (column.path, value)
        resolved += 1
    assert resolved >= 1  # not every column is custom: the paths were looked up


def _has(tree: Mapping[str, Any], path: str) -> bool:
    node: Any = tree
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True
