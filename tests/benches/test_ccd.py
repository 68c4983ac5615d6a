"""CCD-Bench: loading and validation, designs, source download, and whole runs through the CLI."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import CCD_CLUSTERS, ccd_items, prepare, run_probe, write_json_file

from probe.benches.ccd import data as ccd
from probe.errors import ProbeInputError
from probe.files import sha256_file

REPO_ROOT = Path(__file__).resolve().parents[2]
# gini_corrected: the bias-corrected Gini beside the plug-in (probe.metrics.preference); only with a bootstrap
M_KEYS = {"shares", "position_shares", "position_chi2", "position_V", "cluster_position_V",
          "mean_cluster_position_V", "domain_chi2", "domain_residuals", "entropy_bits", "gini", "gini_corrected"}


def _bad(mutate) -> list[dict]:
    items = ccd_items(3)
    mutate(items[1])
    return items


MALFORMED = [
    ("missing-cluster", lambda it: it.pop("latin-america"), ("item 1", "field 'latin-america'", "missing")),
    ("null-domain", lambda it: it.update(Domain=None), ("item 1", "field 'Domain'", "got None")),
    ("unknown-domain", lambda it: it.update(Domain="Sports"), ("item 1", "field 'Domain'", "'Sports'")),
    ("duplicate-texts", lambda it: it.update(nordic_europe="  approach 0 FOR dilemma 1 "),
     ("item 1", "field 'nordic_europe'", "same option text as 'anglo'")),
    ("empty-option", lambda it: it.update(anglo=""), ("item 1", "field 'anglo'", "non-empty string")),
    ("empty-question", lambda it: it.update(Question=" "), ("item 1", "field 'Question'")),
]


@pytest.mark.parametrize(("mutate", "expected"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_items(tmp_path: Path, mutate, expected: tuple[str, ...]) -> None:
    path = write_json_file(tmp_path / "CCD-Bench.json", _bad(mutate))
    with pytest.raises(ProbeInputError) as info:
        ccd.load_items(path)
    assert str(info.value).startswith(str(path))
    for fragment in expected:
        assert fragment in str(info.value)


def test_truncated_and_non_array_json(tmp_path: Path) -> None:
    path = tmp_path / "CCD-Bench.json"
    path.write_text(json.dumps(ccd_items(2))[:-40])
    with pytest.raises(ProbeInputError, match="invalid or truncated JSON .* line 1, column"):
        ccd.load_items(path)
    write_json_file(path, {"Question": "x"})
    with pytest.raises(ProbeInputError, match="expected a non-empty JSON array"):
        ccd.load_items(path)


def test_items_and_cyclic_design(tmp_path: Path) -> None:
    raw = ccd_items(3)
    raw[0]["source_id"] = 17
    items = ccd.load_items(write_json_file(tmp_path / "c.json", raw))
    assert [i.item_id for i in items] == ["ccd-0000", "ccd-0001", "ccd-0002"]
    assert [o.group for o in items[0].options] == CCD_CLUSTERS and items[0].category == "Arts"
    assert ("source_id", "17") in items[0].extra
    prompts = ccd.build_prompts(items, ccd.CCDSpec())
    assert len(prompts) == 30
    p = prompts[13]  # item 1, rotation 3: option (i + 3) mod 10 at letter i
    assert (p.item_id, p.value("rotation"), p.order[:3]) == ("ccd-0001", 3, (3, 4, 5))
    lines = p.message.splitlines()
    assert lines[0] == "Question: Dilemma 1: how should the group decide?" and lines[1] == "Options:"
    assert lines[2] == "A. Approach 3 for dilemma 1" and lines[11] == "J. Approach 2 for dilemma 1"
    assert lines[12] == ('Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} '
                         "(where X is one of A, B, C, D, E, F, G, H, I, J).")
    gen = ccd.build_prompts(items, ccd.CCDSpec(), generate=True)[0].message.splitlines()
    assert gen[-3:] == ["Answer in exactly this format:", "SELECTED OPTION: <one letter from A to J>",
                        "RATIONALE: <one or two sentences>"]
    # the rationale is invited to use GLOBE's nine dimensions, named as the judges classify them
    assert gen[-4] == ("In your rationale you may invoke any of GLOBE's nine cultural dimensions: Performance "
                       "Orientation, Future Orientation, Institutional Collectivism, In-Group Collectivism, Humane "
                       "Orientation, Power Distance, Uncertainty Avoidance, Gender Egalitarianism, Assertiveness.")
    from probe.benches.ccd.judging import GLOBE_DIMENSIONS

    assert len(GLOBE_DIMENSIONS) == 9 and all(d in gen[-4] for d in GLOBE_DIMENSIONS)


def test_latin_square_design(tmp_path: Path) -> None:
    path = write_json_file(tmp_path / "c.json", ccd_items(70))  # 10 items per domain
    bench = prepare({"kind": "ccd", "path": str(path), "design": "latin_square"}, False)
    assert len(bench.prompts) == 70 and bench.source["balance_score"] == 100.0
    for domain in ("Arts", "Work"):
        orders = [p.order for p in bench.prompts if p.category == domain]
        assert len(orders) == 10
        for pos in range(10):  # each cluster once per position within the domain's 10 items
            assert sorted(o[pos] for o in orders) == list(range(10))
    assert [p.value("rotation") for p in bench.prompts if p.category == "Arts"] == list(range(10))


def test_source_url_downloaded_once_and_checksummed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from probe.benches import sources

    local = write_json_file(tmp_path / "published.json", ccd_items(2))
    calls = []
    real = sources._chunks

    def counting(url: str, max_bytes: int, timeout_s: float):
        calls.append(url)
        return real(url, max_bytes, timeout_s)

    monkeypatch.setattr(sources, "_chunks", counting)
    spec = ccd.CCDSpec(url=local.as_uri())
    first = ccd.resolve_source(spec, tmp_path / "cache")
    second = ccd.resolve_source(spec, tmp_path / "cache")
    key = hashlib.sha256(spec.url.encode()).hexdigest()[:16]  # the cache is keyed by URL
    assert first == second == tmp_path / "cache" / "ccd" / key / "published.json" and calls == [spec.url]
    good = sha256_file(first)
    assert ccd.resolve_source(ccd.CCDSpec(url=spec.url, sha256=good), tmp_path / "cache") == first
    with pytest.raises(ProbeInputError, match="does not match bench.sha256"):
        ccd.resolve_source(ccd.CCDSpec(url=spec.url, sha256="0" * 64), tmp_path / "cache")
    bad = write_json_file(tmp_path / "bad.json", _bad(lambda it: it.pop("latin-america")))
    with pytest.raises(ProbeInputError, match="is not a valid bench file, so it was not cached: .*field 'latin-america'"):
        ccd.resolve_source(ccd.CCDSpec(url=bad.as_uri()), tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache" / "ccd").rglob("*.json")) == ["published.json", "published.json.download.json"]


def _cli(tmp: Path, *args: str) -> Path:
    out = tmp / "run"
    env = {**os.environ, "PROBE_CACHE": str(tmp.parent / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=ccd", f"hydra.run.dir={out}",
                           "analysis.n_boot=100", "progress=false", *args],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def ccd_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_json_file(tmp_path_factory.mktemp("data") / "CCD-Bench.json", ccd_items(14))


@pytest.mark.parametrize("design", ["cyclic", "latin_square"])
def test_cli_letter_runs(ccd_json: Path, tmp_path: Path, design: str) -> None:
    out = _cli(tmp_path, f"bench.path={ccd_json}", f"bench.design={design}")
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_items"] == 14 and m["n_prompts"] == (140 if design == "cyclic" else 14)
    assert set(m["expected"]) == M_KEYS and set(m["greedy"]) == M_KEYS and set(m["ci95"]["expected"]) == M_KEYS
    assert set(m["expected"]["shares"]) == set(CCD_CLUSTERS)
    assert sum(m["expected"]["shares"].values()) == pytest.approx(1.0)
    report = (out / "report.md").read_text()
    assert re.findall(r"DiSCo|\bC[0-3]\b|\bPPR\b|LocQA|BLEnD|GlobalOpinion", report) == []  # no other bench's words
    assert ("balance_score" in m) == (design == "latin_square")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["letters"] == list("ABCDEFGHIJ") and len(manifest["letter_token_ids"]) == 10
    assert len(manifest["bench"]["sha256"]) == 64 and manifest["bench"]["design"] == design
    prompts = pq.read_table(out / "prompts.parquet")
    assert set(prompts.column("category").to_pylist()) == {"Arts", "Education", "Family", "Wellness", "Work",
                                                           "Scientific", "Lifestyle"}


def test_cli_generate_run(ccd_json: Path, tmp_path: Path) -> None:
    out = _cli(tmp_path, f"bench.path={ccd_json}", "bench.limit=3", "backend.mode=generate",
               "backend.max_new_tokens=12")
    gens = pq.read_table(out / "generations.parquet")
    assert gens.schema.names == ["prompt_id", "text", "parsed_letter", "rationale"] and gens.num_rows == 30
    m = json.loads((out / "metrics.json").read_text())
    assert m["mode"] == "generate" and m["n_prompts"] == 30
    assert m["n_invalid"] == sum(g is None for g in gens.column("parsed_letter").to_pylist())
    assert m["invalid_rate"] == pytest.approx(m["n_invalid"] / 30)
    assert f"Invalid generations ({m['n_invalid']})" in (out / "report.md").read_text()


def test_sym_kl_between_runs(tmp_path: Path) -> None:
    from probe.benches.ccd.metrics import sym_kl_between_runs

    for name, shares in (("a", {"anglo": 0.5, "nordic_europe": 0.5}), ("b", {"anglo": 0.9, "nordic_europe": 0.1})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps({"expected": {"shares": shares}}))
    # ½[.5 ln(.5/.9) + .5 ln(.5/.1) + .9 ln(.9/.5) + .1 ln(.1/.5)] = ½(0.510826 + 0.368064)
    assert sym_kl_between_runs(tmp_path / "a", tmp_path / "b") == pytest.approx(0.439445, abs=1e-6)
    assert sym_kl_between_runs(tmp_path / "a", tmp_path / "a") == pytest.approx(0.0)
    with pytest.raises(ProbeInputError, match="no metrics.json"):
        sym_kl_between_runs(tmp_path / "a", tmp_path / "missing")
