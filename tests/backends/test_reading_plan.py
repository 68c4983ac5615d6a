"""The typed reading plan: readings and backends named once (`probe.backends.reading`, each
backend spec's `capabilities`), a run's passes resolved once from its config
(`probe.pipeline.plan`), stored runs read through their manifest's typed reading — and no
string comparison with a reading or backend name outside one module."""

from __future__ import annotations

import ast
from dataclasses import asdict, fields
from pathlib import Path
from typing import get_args

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from probe.backends.reading import Capabilities, Reading
from probe.backends.specs import BACKENDS, HFBackendSpec, Mode, VLLMSpec, capabilities_of
from probe.benches.registry import get_task
from probe.benches.task import Answers
from probe.config import package_conf_dir
from probe.errors import ProbeInputError
from probe.pipeline.plan import reading_plan
from probe.pipeline.spec import run_config
from probe.results.manifest import BackendRecord
from probe.results.records import pick

PACKAGE = Path(__file__).resolve().parents[2] / "probe"
NAMES = frozenset({r.value for r in Reading} | set(BACKENDS))
"""Every reading's and backend's config name: what no comparison outside one module may spell."""


# --- the static rule -------------------------------------------------------------------------

def _named(node: ast.AST) -> set[str]:
    """The reading or backend names a comparison operand spells: a string constant, or a tuple,
    list or set of them (`mode in ("text", "letters+text")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_named(e) for e in node.elts)) if node.elts else set()
    return set()


def string_dispatch(source: str) -> list[int]:
    """Lines of `source` that compare a value with a reading or backend name: `==`, `!=`, `in`,
    `is` against a string constant (or a tuple of them), and `case "text":` patterns."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_named(n) for n in (node.left, *node.comparators)):
            found.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _named(node.value):
            found.append(node.lineno)
    return sorted(found)


def test_readings_and_backends_are_compared_as_strings_in_at_most_one_module() -> None:
    by_module = {str(p.relative_to(PACKAGE.parent)): lines for p in sorted(PACKAGE.rglob("*.py"))
                 if (lines := string_dispatch(p.read_text()))}
    assert len(by_module) <= 1, f"string comparisons with reading/backend names {sorted(NAMES)}: {by_module}"


def test_the_dispatch_check_sees_each_way_it_is_written() -> None:
    assert string_dispatch('if cfg.backend.mode == "generate":\n    pass\n') == [1]
    assert string_dispatch('ok = "hf" != spec.name\n') == [1]
    assert string_dispatch('x = 1\ntext = mode in ("text", "letters+text")\n') == [2]
    assert string_dispatch('flag = name not in ["vllm"]\n') == [1]
    assert string_dispatch('match mode:\n    case "letters":\n        pass\n') == [2]
    assert string_dispatch('open_ = task.answers == "open"\nmode = "text"\nf(mode="generate")\n') == []
    assert string_dispatch('ok = reading is Reading.TEXT\n') == []


# --- readings and capabilities ---------------------------------------------------------------

def test_each_reading_is_the_config_value_it_replaces() -> None:
    """`backend.mode`'s values are exactly the readings', so stored manifests and conf files
    keep their strings."""
    assert {r.value for r in Reading} == set(get_args(Mode))
    assert [(r.reads_letters, r.reads_text, r.generates) for r in Reading] == [
        (True, False, False), (False, True, False), (True, True, False), (False, False, True)]
    assert f"backend.mode={Reading.LETTERS_TEXT}" == "backend.mode=letters+text"
    assert HFBackendSpec(mode="letters+text").reading is Reading.LETTERS_TEXT
    with pytest.raises(ProbeInputError, match=r"^where: expected one of \['letters', 'text', 'letters\+text', "
                                              r"'generate'\], got 'sample'$"):
        Reading.parse("sample", "where")


def test_every_backend_declares_its_capabilities() -> None:
    assert set(BACKENDS) == {"hf", "vllm"}
    for name, spec in BACKENDS.items():
        assert spec().name == name and isinstance(spec.capabilities, Capabilities)
        assert capabilities_of(name) is spec.capabilities
    assert HFBackendSpec.capabilities.on_weights and HFBackendSpec.capabilities.hooks
    assert not VLLMSpec.capabilities.on_weights and not VLLMSpec.capabilities.hooks
    assert capabilities_of("tgi") is None and capabilities_of(None) is None
    for spec in BACKENDS.values():  # a class constant, never a config key nor a recorded one
        assert "capabilities" not in {f.name for f in fields(spec)} and "capabilities" not in asdict(spec())


# --- the plan --------------------------------------------------------------------------------

def _plan(kind: str, backend: HFBackendSpec | VLLMSpec, dry_run: bool = False):  # type: ignore[no-untyped-def]
    plan = reading_plan(get_task(kind), backend, dry_run)
    return (plan.reading, plan.generation, plan.letters_pass, plan.text_pass, plan.loads_weights, plan.hooks,
            plan.answer_files())


def test_the_plan_of_each_reading_and_backend() -> None:
    letters = ("scores.parquet", "scores.safetensors")
    assert _plan("disco", HFBackendSpec()) == (Reading.LETTERS, False, True, False, True, True, letters)
    assert _plan("disco", HFBackendSpec(mode="text")) == (Reading.TEXT, False, False, True, True, True,
                                                          ("scores.parquet",))
    assert _plan("disco", VLLMSpec(mode="letters+text")) == (Reading.LETTERS_TEXT, False, True, True, False, False,
                                                             letters)
    assert _plan("disco", HFBackendSpec(mode="generate")) == (Reading.GENERATE, True, False, False, True, False,
                                                              ("generations.parquet",))
    assert _plan("disco", HFBackendSpec(), dry_run=True)[4] is False  # a dry run loads no weights
    # open answers are generated whatever `backend.mode` says
    assert get_task("locqa").answers is Answers.OPEN
    assert _plan("locqa", HFBackendSpec())[:4] == (Reading.GENERATE, True, False, False)


def _config(*overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", *overrides])
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    return values


def test_the_run_config_resolves_its_plan_once(tmp_path: Path) -> None:
    cfg = run_config(_config("bench=disco", "backend.mode=letters+text"), tmp_path / "run")
    assert cfg.plan.reading is Reading.LETTERS_TEXT and cfg.text_reading and not cfg.generates
    cfg = run_config(_config("bench=disco", "dry_run=true"), tmp_path / "run")
    assert cfg.plan.letters_pass and not cfg.plan.loads_weights
    # asked for a text reading, an open-answer bench refuses it (it is not quietly generated)
    with pytest.raises(ProbeInputError, match=r"backend\.mode=text: LocQA has no answer-text reading \(its answers "
                                              r"are open\)"):
        run_config(_config("bench=locqa", "backend.mode=text"), tmp_path / "run")
    with pytest.raises(ProbeInputError, match=r"need backend=hf and letter scoring"):
        run_config(_config("bench=disco", "backend=vllm", "analysis.logit_lens=true"), tmp_path / "run")


# --- stored runs -----------------------------------------------------------------------------

def test_a_stored_run_is_read_through_its_typed_reading() -> None:
    def record(**raw: object) -> BackendRecord:
        return pick(BackendRecord, raw, "backend")

    assert record(name="vllm", mode="text").reading is Reading.TEXT
    assert record(name="hf").reading is Reading.LETTERS  # recorded before modes were
    assert record(name="hf").scoring_path == "eager" and record(name="hf", fast_path=True).scoring_path == "fast"
    assert record(name="vllm").scoring_path is None and record(name="hf", path="fast+packed").scoring_path == "fast+packed"
    with pytest.raises(ProbeInputError, match=r"^manifest\.json, field 'backend\.mode': expected one of .*got 'beam'$"):
        _ = record(name="hf", mode="beam").reading


# --- the config tree -------------------------------------------------------------------------

def test_the_config_tree_holds_every_backend_and_judge_and_no_bench_judge_by_default() -> None:
    from probe.judges.registry import judge_names

    conf = package_conf_dir()
    assert {p.stem for p in (conf / "backend").glob("*.yaml")} == set(BACKENDS)
    assert set(judge_names()) | {"auto"} == {p.stem for p in (conf / "judge").glob("*.yaml")}
    head = (conf / "config.yaml").read_text().split("\n\n")[0]
    assert "  - backend: hf\n" in head and "  - judge: auto\n" in head
    assert _config("bench=disco")["judge"] == {"name": None}  # the bench's own default, resolved per run
