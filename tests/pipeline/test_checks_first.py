"""Every check across config blocks runs when the config becomes a `RunConfig`: a combination the
run cannot honour stops before the bench is prepared (which may download a dataset) and before
any model loads."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from probe.backends.specs import HFBackendSpec, VLLMSpec
from probe.benches.task import PreparedBench
from probe.errors import ProbeInputError
from probe.judges import JudgeSpec
from probe.models import ModelSpec
from probe.models.tiny import TinySpec
from probe.pipeline.intervention import PatchSpec
from probe.pipeline.execute import run
from probe.pipeline.spec import AnalysisSpec, BenchRef, RunConfig, bench_ref, run_config

MODEL = ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec())


class PrepareReached(Exception):
    """Raised by a bench whose data must never be asked for."""


def _unpreparable(values: dict[str, Any]) -> BenchRef:
    """The bench `values` names, with a `prepare` that fails the test if a run ever calls it."""
    def prepare(spec: Any, generate: bool, cache: Path) -> PreparedBench:
        raise PrepareReached(f"prepare({spec.name}) was called")

    ref = bench_ref(values)
    return replace(ref, task=replace(ref.task, data=replace(ref.task.data, prepare=prepare)))


@pytest.mark.parametrize("bench, options, message", [
    ({"kind": "locqa"}, {"judge": JudgeSpec(name="keyword")},
     "judge=keyword cannot judge LocQA; its judges: judge=rules (the default: no judge option), judge=llm, judge=http"),
    ({"kind": "disco"}, {"backend": VLLMSpec(), "analysis": AnalysisSpec(logit_lens=True)},
     "analysis.logit_lens / capture_layers need backend=hf and letter scoring"),
    ({"kind": "disco"}, {"backend": HFBackendSpec(mode="generate"), "analysis": AnalysisSpec(capture_layers=(0,))},
     "analysis.logit_lens / capture_layers need backend=hf and letter scoring"),
    ({"kind": "disco", "shard": "1/2"}, {"intervention": PatchSpec()},
     "intervention=patch needs backend=hf and letter scoring, unsharded"),
    ({"kind": "disco"}, {"backend": VLLMSpec(), "intervention": PatchSpec()},
     "intervention=patch needs backend=hf and letter scoring, unsharded"),
    ({"kind": "disco", "shard": "1/2"}, {"backend": HFBackendSpec(prefix_reuse=False)},
     "bench.shard needs backend.prefix_reuse=true"),
    ({"kind": "locqa"}, {"judge": JudgeSpec(name="http", model="served")},
     "judge=http needs judge.base_url and judge.model"),
    ({"kind": "disco"}, {"model": ModelSpec(name="m", kind="instruct")},
     "model 'm': `hub_id` is required for source 'auto'"),
    ({"kind": "disco"}, {"model": ModelSpec(name="m", kind="instruct", source="tiny")},
     "model 'm': source 'tiny' needs a `tiny:` block"),
    ({"kind": "locqa"}, {"judge": JudgeSpec(name="llm"), "judge_model": ModelSpec(name="j", kind="auto", source="gguf")},
     "model 'j': source 'gguf' needs a `gguf:` block"),
])
def test_a_combination_the_run_cannot_honour_stops_before_prepare(bench: dict[str, Any], options: dict[str, Any],
                                                                   message: str, tmp_path: Path) -> None:
    ref = _unpreparable(bench)
    with pytest.raises(ProbeInputError) as raised:
        run(RunConfig(**{"model": MODEL, **options}, bench=ref, out_dir=tmp_path / "run"))
    assert message in str(raised.value)
    assert not (tmp_path / "run").exists()


def test_an_honourable_combination_does_reach_prepare(tmp_path: Path) -> None:
    """The stand-in bench really stops a run that gets past the checks (the test above can fail)."""
    with pytest.raises(PrepareReached, match=r"prepare\(disco\) was called"):
        run(RunConfig(model=MODEL, bench=_unpreparable({"kind": "disco"}), out_dir=tmp_path / "run",
                      analysis=AnalysisSpec(logit_lens=True)))


@pytest.mark.parametrize("overrides, refused", [
    (["judge=llm"], True), (["+judge.model=qwen3-8b", "bench.limit=2"], True), (["~judge"], True),
    (["bench.limit=2", "analysis.n_boot=10"], False), ([], False),
])
def test_judge_options_on_a_run_that_judges_nothing(overrides: list[str], refused: bool, tmp_path: Path) -> None:
    """Only the command line knows which options were given: `run_config` takes its overrides."""
    values = {"model": {"name": "tiny", "kind": "instruct", "source": "tiny", "tiny": {}}, "bench": {"kind": "disco"}}
    if refused:
        given = [o for o in overrides if o.lstrip("+~").startswith("judge")]
        with pytest.raises(ProbeInputError, match=f"^{re.escape(repr(given))}: this run judges nothing"):
            run_config(values, tmp_path, overrides=overrides)
    else:
        assert not run_config(values, tmp_path, overrides=overrides).judged
    judged = {**values, "bench": {"kind": "locqa"}, "judge": {"name": "rules"}}
    assert run_config(judged, tmp_path, overrides=overrides).judged  # a judged run takes judge options
