"""OpinionQA end to end on small files in the published schema, tiny model: every group's
representativeness, steerability and placebo recomputed without the bench's code from
scores.parquet; the persona formats in the prompts; the survey's error in the intervals and the
human ceiling; the same content as a survey table; malformed files stopped with one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe
from opinionqa_files import GROUPS, QUESTIONS, counts, write_table, write_wave
from scipy.stats import wasserstein_distance

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARGS = ["model=tiny", "bench=opinionqa", "analysis.n_boot=60", "progress=false", "bench.personas=[qa,bio,portray]"]


def run(out: Path, *args: str) -> dict:
    proc = run_probe([*ARGS, f"hydra.run.dir={out}", *args], cwd=REPO, env=probe_env(out.parent / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("opinionqa")
    wave = write_wave(root / "human_resp" / "American_Trends_Panel_W1")
    table = write_table(root / "survey.jsonl")
    return {"wave": (root / "wave", run(root / "wave", f"bench.path={wave}")),
            "table": (root / "table", run(root / "table", f"bench.path={table}", "bench.format=table"))}


def _model(run_dir: Path) -> dict[tuple[str, str, str | None], np.ndarray]:
    """(item, condition, target) → rotation-mean softmax over the prompt's own letters (T = 1)."""
    prompts = pq.read_table(run_dir / "prompts.parquet").to_pylist()
    scores = {r["prompt_id"]: r["letter_logprobs"] for r in pq.read_table(run_dir / "scores.parquet").to_pylist()}
    acc: dict[tuple[str, str, str | None], list[np.ndarray]] = {}
    for p in prompts:
        k = sum(o >= 0 for o in p["order"])
        lp = np.array(scores[p["prompt_id"]][:k], np.float64)
        probs = np.exp(lp - lp.max())
        probs /= probs.sum()
        dist = np.zeros(k)
        dist[np.array(p["order"][:k])] = probs
        acc.setdefault((p["item_id"], p["condition"], p["target"]), []).append(dist)
    return {key: np.mean(v, axis=0) for key, v in acc.items()}


def _rep(p: np.ndarray, options: list[str], ordinal: list[float], answers: dict[str, float]) -> float:
    """1 − W1/(N − 1) on the stated positions, refusal (the options past the ordinal ones) left out."""
    n = len(ordinal)
    h = np.array([answers.get(o, 0.0) for o in options[:n]])
    return 1.0 - wasserstein_distance(ordinal, ordinal, p[:n] / p[:n].sum(), h / h.sum()) / (n - 1)


def _recompute(run_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per condition, attribute and group: the paper's numbers from the files the test wrote."""
    model, data = _model(run_dir), counts()
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for key, _, options, ordinal in QUESTIONS:
        for attribute, groups in GROUPS.items():
            for g in groups:
                answers = data[attribute][key][g]
                out.setdefault("default", {}).setdefault(attribute, {}).setdefault(g, []).append(
                    _rep(model[(key, "default", None)], options, ordinal, answers))
                for fmt in ("qa", "bio", "portray"):
                    own = _rep(model[(key, fmt, f"{attribute}={g}")], options, ordinal, answers)
                    others = [_rep(model[(key, fmt, f"{attribute}={h}")], options, ordinal, answers)
                              for h in groups if h != g]
                    for name, v in (("steer", own), ("placebo", float(np.mean(others)))):
                        out.setdefault(f"{fmt}:{name}", {}).setdefault(attribute, {}).setdefault(g, []).append(v)
        panel = {o: sum(data["POLPARTY"][key][g].get(o, 0) for g in GROUPS["POLPARTY"]) for o in options}
        out.setdefault("overall", {}).setdefault("NONE", {}).setdefault("Overall", []).append(
            _rep(model[(key, "default", None)], options, ordinal, panel))
    return {c: {a: {g: float(np.mean(v)) for g, v in by.items()} for a, by in t.items()} for c, t in out.items()}


def test_representativeness_steerability_placebo_equal_a_recomputation(runs) -> None:
    run_dir, m = runs["wave"]
    want = _recompute(run_dir)
    tree = m["expected"]
    for attribute, groups in GROUPS.items():
        for g in groups:
            assert abs(tree["default"]["representativeness"][attribute][g] - want["default"][attribute][g]) < 1e-6
            for fmt in ("qa", "bio", "portray"):
                steer, placebo = want[f"{fmt}:steer"][attribute][g], want[f"{fmt}:placebo"][attribute][g]
                assert abs(tree[fmt]["steerability"][attribute][g] - steer) < 1e-6
                assert abs(tree[fmt]["placebo"][attribute][g] - placebo) < 1e-6
                assert abs(tree[fmt]["gain"][attribute][g] - (steer - placebo)) < 1e-6
    assert abs(tree["default"]["overall"]["representativeness"] - want["overall"]["NONE"]["Overall"]) < 1e-6
    assert set(m["debiased"]["default"]["representativeness"]["AGE"]) == {"18-29", "65+"}


def test_the_three_persona_formats_appear_for_every_group(runs) -> None:
    run_dir, _ = runs["wave"]
    prompts = pq.read_table(run_dir / "prompts.parquet", columns=["condition", "target", "text"]).to_pylist()
    marks = {"qa": "\nAnswer: ", "bio": "Description: ", "portray": "Answer the following question as if "}
    for attribute, groups in GROUPS.items():
        for g in groups:
            for fmt, mark in marks.items():
                texts = [p["text"] for p in prompts if p["condition"] == fmt and p["target"] == f"{attribute}={g}"]
                assert len(texts) == sum(len(q[2]) for q in QUESTIONS)  # every question under every rotation
                assert all(mark in t and g in t.split("Question: ")[-2 if fmt == "qa" else 0] for t in texts)


def test_a_small_group_gets_a_wider_interval_and_a_lower_ceiling(runs) -> None:
    _, m = runs["wave"]
    point = m["expected"]["default"]["representativeness"]["AGE"]
    ci = m["ci95"]["expected"]["default"]["representativeness"]["AGE"]
    assert abs(point["18-29"] - point["65+"]) < 5e-3  # the same shares, 20 respondents against 4,000
    assert ci["18-29"][1] - ci["18-29"][0] > ci["65+"][1] - ci["65+"][0]
    ceiling = m["human_ceiling"]["AGE"]
    for measure in ("representativeness", "jsd_similarity"):
        assert ceiling["18-29"][measure] < ceiling["65+"][measure] < 1.0
    for by in m["human_ceiling"].values():
        assert all(0 < c["representativeness"] < 1 for c in by.values())


def test_the_same_content_as_a_table_gives_the_same_metrics(runs) -> None:
    _, wave = runs["wave"]
    _, table = runs["table"]
    for key in ("expected", "greedy", "debiased", "ci95", "human_ceiling", "n_questions", "respondents", "naming"):
        _close(wave[key], table[key], key)


def _close(a: object, b: object, where: str) -> None:
    """Equal trees, numbers within 1e-9 (the letter prior's fit sums in another order)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == b or abs(a - b) < 1e-9, (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_groups_are_named_only_when_the_test_rejects(runs) -> None:
    _, m = runs["wave"]
    n = m["naming"]
    assert n["measure"] == "representativeness" and 0 < n["p_value"] <= 1
    assert set(n["deviation"]) == {f"{a}={g}" for a, gs in GROUPS.items() for g in gs}
    if n["p_value"] >= 0.05:
        assert n["closest"] is None and n["furthest"] is None


def test_the_generic_readings_apply(tmp_path: Path) -> None:
    """The answer-text reading and another ordering design run through the bench's own metrics."""
    wave = write_wave(tmp_path / "wave")
    m = run(tmp_path / "run", f"bench.path={wave}", "bench.orders=reverse", "backend.mode=letters+text",
            "bench.personas=[portray]", "bench.attributes=[SEX]")
    assert m["n_prompts"] == 2 * 5 * 3  # 2 orderings × 5 questions × (default + 2 personas)
    for tree in ("expected", "text", "text_norm"):  # debiased: null, two orderings cannot separate the letter
        assert set(m[tree]["default"]["representativeness"]["SEX"]) == {"Male", "Female"}, tree
    assert "portray" in m["text"]
