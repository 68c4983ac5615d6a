"""Typed judges: a judge name selects a `JudgeKind` that says whether it needs a local model, which
config keys it reads, its identity for the run key and how it is made; code outside
`probe/judges/` (and the intervention specs' own module) compares no judge or intervention name."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest

from probe.errors import ProbeInputError
from probe.judges import JudgeSpec, judge_kind, make_judge
from probe.judges.spec import TRANSPORT_KEYS
from probe.pipeline.intervention import INTERVENTIONS
from probe.pipeline.judging import TRANSPORT

ROOT = Path(__file__).resolve().parents[2]


def test_each_judge_name_selects_a_typed_kind() -> None:
    import probe.benches.locqa  # noqa: F401  (registers its deterministic judge `rules`)

    assert [(n, judge_kind(n).needs_local_model) for n in ("llm", "http", "rules")] == [
        ("llm", True), ("http", False), ("rules", False)]
    assert set(judge_kind("http").keys) - set(judge_kind("llm").keys) == {"base_url", *TRANSPORT_KEYS}
    assert set(TRANSPORT_KEYS) < set(TRANSPORT) and "base_url" not in TRANSPORT  # the endpoint is identity
    assert make_judge(JudgeSpec(name="rules")).name == "rules"
    with pytest.raises(ProbeInputError, match="judge=http needs judge.base_url and judge.model"):
        make_judge(JudgeSpec(name="http", model="served"))
    with pytest.raises(ProbeInputError, match="unknown judge 'nope'"):
        make_judge(JudgeSpec(name="nope"))


def test_a_judges_identity_is_its_block_without_secrets_and_an_llm_judge_its_model() -> None:
    spec = JudgeSpec(name="http", model="served", base_url="http://user:pw@host:1/v1")
    record = judge_kind("http").identity(spec, {"name": "m"})
    assert list(record) == [k for k in asdict(spec) if k != "api_key_env"]  # the order the run key always had
    assert record["base_url"] == "http://***@host:1/v1" and record["model"] == "served"
    assert judge_kind("llm").identity(JudgeSpec(name="llm"), {"name": "m"})["model"] == {"name": "m"}
    assert spec.transport.max_retries == spec.max_http_retries and spec.transport.base_url == spec.base_url


def test_interventions_say_whether_they_act() -> None:
    assert {name: cls().active for name, cls in INTERVENTIONS.items()} == {"none": False, "patch": True,
                                                                           "steer": True}


def test_no_judge_or_intervention_name_is_compared_outside_its_own_package() -> None:
    compared = re.compile(r"""([!=]=|\bin)\s*[({\[]?\s*["'](llm|http|none)["']|["'](llm|http|none)["']\s*([!=]=|(not\s+)?in\b)""")
    allowed = {ROOT / "probe" / "pipeline" / "intervention.py"}
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "probe").rglob("*.py")
            if "judges" not in p.relative_to(ROOT).parts and p not in allowed
            for i, line in enumerate(p.read_text().splitlines(), 1) if compared.search(line)]
    assert hits == []
