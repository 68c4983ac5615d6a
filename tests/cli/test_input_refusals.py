"""Round-4 refusals of bad input, each in one line: BLEnD ids given twice in a JSON file, a bad
BLEnD download (refused before it is cached, naming the URL), a short row in a BLEnD questions
CSV, two identical DiSCo options, `probe compare` across readings, credentials in
`judge.base_url` (never on disk nor in the log), and judge timeouts summarised as timeouts."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import blend_dir, disco_rows, run_probe, write_csv

from probe.errors import ProbeInputError

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
US = ("annotations/US_data.json", "questions/US_questions.csv", "prompts/US_prompts.csv")


def _us_copy(root: Path) -> dict[str, Path]:
    """BLEnD's three US files, copied (the loader reads one country)."""
    files = {}
    for name in US:
        files[name] = root / name
        files[name].parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(blend_dir() / name, files[name])
    return files


def test_blend_question_id_given_twice_in_json(tmp_path: Path) -> None:
    """Before: `json` kept the last of the two values silently."""
    from probe.benches.blend.data import load

    files = _us_copy(tmp_path)
    path = files[US[0]]
    text = path.read_text(encoding="utf-8")
    first = next(iter(json.loads(text)))
    body = json.dumps(json.loads(text)[first], ensure_ascii=False)
    path.write_text(text.rstrip().rstrip("}") + f', "{first}": {body}}}', encoding="utf-8")
    with pytest.raises(ProbeInputError, match=rf"US_data.json: key '{first}' appears twice in one JSON object"):
        load(files, ("US",))


def test_blend_questions_csv_with_reordered_columns_and_a_short_row(tmp_path: Path) -> None:
    """Before: `AttributeError: 'NoneType' object has no attribute 'strip'`."""
    from probe.benches.blend.data import load

    files = _us_copy(tmp_path)
    path = files[US[1]]
    with path.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    order = ["Translation", "ID", "Topic", "Question"]
    with path.open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(order)
        out.writerows([[r[c] for c in order] for r in rows[:3]])
        out.writerow([rows[3]["Translation"], rows[3]["ID"], rows[3]["Topic"]])  # a short row: no Question
    with pytest.raises(ProbeInputError, match=r"US_questions.csv: row 5 has 3 cell\(s\) where the header has 4 columns"):
        load(files, ("US",))


def test_a_bad_blend_download_is_not_cached(tmp_path: Path) -> None:
    """Before: the bad copy entered the cache and the error (from the loader) named the cache path."""
    from probe.benches.blend.data import BlendSpec, resolve_files

    mirror = tmp_path / "mirror"
    shutil.copytree(blend_dir(), mirror, ignore=shutil.ignore_patterns("README*"))
    (mirror / US[0]).write_text("<html>rate limited</html>", encoding="utf-8")
    url = f"{mirror.as_uri()}/{US[0]}"
    spec = BlendSpec(url=mirror.as_uri(), sha256=None)
    with pytest.raises(ProbeInputError, match=rf"^download of {url} is not a valid bench file, so it was not cached"):
        resolve_files(spec, tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("US_data.json"))


def test_disco_refuses_two_identical_options(tmp_path: Path) -> None:
    """Before: accepted (their text mass counted twice in the text reading)."""
    from probe.benches.disco.data import load_items

    rows = disco_rows(2)
    options = json.loads(rows[1]["Options"])
    rows[1]["Options"] = json.dumps({**options, "D": f"  {options['B'].upper()} "})
    path = write_csv(tmp_path / "disco.csv", rows)
    with pytest.raises(ProbeInputError, match=r"line 3 \(ID 'item-1'\), field 'Options' key 'D': same option text as "
                                              "key 'B'"):
        load_items(path)


def _disco_run(out: Path, csv_path: Path, *overrides: str) -> Path:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", f"bench.path={csv_path}",
                                                       "bench.conditions=[C0]", "analysis.n_boot=20",
                                                       "progress=false", *overrides])
    return pipeline.run(run_config(OmegaConf.to_container(cfg, resolve=True), out))


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three finished tiny DiSCo runs of one file: letters, text (cloze) and text (hybrid)."""
    root = tmp_path_factory.mktemp("readings")
    csv_path = write_csv(root / "disco.csv", disco_rows(2))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(root / "cache"))
        return {name: _disco_run(root / name, csv_path, *args) for name, args in (
            ("letters", ()), ("cloze", ("backend.mode=text", "bench.text_form=cloze")),
            ("hybrid", ("backend.mode=text", "bench.text_form=hybrid")))}


@pytest.mark.parametrize("a, b, says", [
    ("letters", "cloze", "a backend.mode=letters run and .* a backend.mode=text bench.text_form=cloze run"),
    ("hybrid", "cloze", "a backend.mode=text bench.text_form=hybrid run and .* bench.text_form=cloze run"),
])
def test_compare_refuses_two_readings(a: str, b: str, says: str, readings: dict[str, Path]) -> None:
    """Before: compared, labelling both `expected.*`."""
    from probe.commands.compare import compare_runs

    with pytest.raises(ProbeInputError, match=says):
        compare_runs(readings[a], readings[b])
    assert compare_runs(readings["cloze"], readings["cloze"]).differences  # one reading still compares


def test_judge_credentials_never_reach_the_disk_or_the_log(tmp_path: Path) -> None:
    """Before: `user:secret@` was in manifest.json, run_key.json, .hydra/* and httpx's request log."""
    data = tmp_path / "locqa.json"
    data.write_text(json.dumps({"What side of the road do people drive on?": {"category": "State", "languages": {
        "English": {"translated_question": "What side of the road do people drive on?",
                    "answers": {"USA": "Right", "UK": "Left"}}}}}), encoding="utf-8")
    out = tmp_path / "run"
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=locqa", f"bench.path={data}",
                           "bench.sha256=null", "judge=http", "judge.base_url=http://user:s3cret@127.0.0.1:9/v1",
                           "judge.model=m", "judge.max_http_retries=0", "judge.retries=0", "judge.max_error_rate=1",
                           "backend.max_new_tokens=2", f"hydra.run.dir={out}", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml")]
    assert {"manifest.json", "run_key.json", "config.yaml", "overrides.yaml"} <= {p.name for p in written}
    for path in written:
        assert "s3cret" not in path.read_text(encoding="utf-8"), path
    assert "s3cret" not in proc.stderr + proc.stdout
    assert json.loads((out / "manifest.json").read_text())["judge"]["base_url"] == "http://***@127.0.0.1:9/v1"


def test_judge_timeouts_are_summarised_as_timeouts() -> None:
    """Before: `invalid after 1 attempts: no JSON object in the output`."""
    from probe.judges.base import JudgeRequest
    from probe.judges.llm import LLMJudge
    from probe.pipeline.judging import JudgeFailure, check_error_rate

    class Silent:
        def chat(self, messages: list[str]) -> list[str]:
            return ["<http error after 1 attempt(s): timed out: no complete response within 1 s (judge.timeout_s)>"
                    for _ in messages]

    results = LLMJudge(Silent(), retries=0, name="http").judge([JudgeRequest("globe_dimensions", {"rationale": "x"})])
    assert results[0].error is not None and results[0].error.startswith("request failed: http error")
    with pytest.raises(JudgeFailure, match=r"1× request failed: http error after 1 attempt\(s\): timed out"):
        check_error_rate([{"judge_error": results[0].error}], 0.0)
