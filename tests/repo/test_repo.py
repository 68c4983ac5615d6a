"""The repository's own promises: README commands, CI, configs and registry agree."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from conftest import run_probe

from probe.benches.registry import BUILTIN, get_task
from probe.commands.confgen import stale
from probe.config import build, package_conf_dir
from probe.errors import ProbeInputError
from probe.models import ModelSpec
from probe.pipeline.spec import RunConfig, run_config

ROOT = Path(__file__).resolve().parents[2]
CONF = package_conf_dir()


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README must open with a bash block"
    return [line.split("#")[0].strip() for line in block.group(1).strip().splitlines()]


def test_ci_runs_the_readme_test_command() -> None:
    run_cmd, test_cmd = _readme_commands()
    assert run_cmd.endswith("-m probe") and "pytest" in test_cmd
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert test_cmd in ci_lines


def test_configs_live_at_the_top_and_ship_in_the_wheel() -> None:
    """`conf/` at the repository's top (one group per seam); pyproject maps it into the package as
    `probe.conf` and lists every package explicitly (a mapped folder is not found by discovery)."""
    assert CONF == ROOT / "conf" and (CONF / "config.yaml").is_file()
    assert not (ROOT / "probe" / "conf").exists()
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setup["package-dir"] == {"probe.conf": "conf"}
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "probe").rglob("__init__.py")}
    groups = {p.name for p in CONF.iterdir() if p.is_dir()}
    # every folder that ships files is listed, code or data alike: setuptools warns once per
    # folder it would ship without a listing (a clean set-up prints no packaging warning)
    data = {"probe.conf", "probe.data", *(f"probe.conf.{g}" for g in groups)}
    assert set(setup["packages"]) == on_disk | data
    assert setup["package-data"] == {"probe.data": ["*.csv"], **{p: ["*.yaml"] for p in data - {"probe.data"}}}


def test_generated_configs_match_their_specs() -> None:
    """Defaults live in the spec dataclasses; the YAML files are generated from them."""
    assert stale() == [], "run `python -m probe.commands.confgen`"


def test_every_model_config_builds_and_pairs_are_mutual() -> None:
    specs = {p.stem: build(ModelSpec, yaml.safe_load(p.read_text()), p.name) for p in (CONF / "model").glob("*.yaml")
             if p.stem != "hub"}  # hub.yaml takes its name from model.hub_id (test below)
    assert {"tiny", "smollm2-135m", "gemma-3-12b", "gemma-3-12b-pt", "llama-3.1-8b", "llama-3.1-8b-base",
            "qwen3-8b", "qwen3-8b-base", "olmo-2-7b", "olmo-2-7b-base"} <= set(specs)
    for stem, spec in specs.items():
        assert spec.name == stem, f"{stem}.yaml names itself {spec.name!r}"
        if spec.pair is not None:
            other = specs[spec.pair]
            assert other.pair == stem and {spec.kind, other.kind} == {"instruct", "base"}, stem
        if spec.source in ("hub", "auto"):
            assert spec.hub_id and "/" in spec.hub_id
    assert specs["qwen3-8b"].chat_template_kwargs == {"enable_thinking": False}
    assert "date_string" in specs["llama-3.1-8b"].chat_template_kwargs


def test_hub_model_config_names_the_run_after_the_checkpoint() -> None:
    from omegaconf import OmegaConf

    import probe.commands.run  # noqa: F401  (registers the `basename` resolver, as the CLI does)

    for ref, name in (("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"), ("/data/ckpt/step-100/", "step-100")):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("config", overrides=["model=hub", f"model.hub_id={ref}"])
        spec = build(ModelSpec, OmegaConf.to_container(cfg.model, resolve=True), "model")
        assert (spec.name, spec.kind, spec.dtype, spec.hub_id) == (name, "auto", "auto", ref)


def _group(name: str) -> list[str]:
    return sorted(p.stem for p in (CONF / name).glob("*.yaml"))


@pytest.mark.parametrize("bench", _group("bench"))
@pytest.mark.parametrize("backend", _group("backend"))
@pytest.mark.parametrize("judge", _group("judge"))
def test_every_config_composes_into_a_typed_run(bench: str, backend: str, judge: str, tmp_path: Path) -> None:
    """Compose each bench × backend × judge as the entry point does and build the typed run config;
    a judge the bench's answers cannot be read by stops right there, before the bench is prepared;
    `judge=auto` (the default) is the bench's own default judge."""
    overrides = [f"bench={bench}", f"backend={backend}", f"judge={judge}"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    from omegaconf import OmegaConf

    values = OmegaConf.to_container(cfg, resolve=False)
    values.pop("hydra", None)
    task = get_task(values["bench"]["kind"])
    judged = bool(task.judging.judges) and (task.answers == "open" or values["backend"].get("mode") == "generate")
    resolved = task.judging.default if judge == "auto" else judge
    if judged and resolved not in task.judging.judges:
        with pytest.raises(ProbeInputError, match=f"judge={judge} cannot judge {task.title}; its judges: "):
            run_config(values, tmp_path, overrides=overrides)
        return
    if judged and judge == "http":  # its endpoint is the user's to give
        assert values["judge"]["base_url"] is None
        with pytest.raises(ProbeInputError, match="judge=http needs judge.base_url and judge.model"):
            run_config(values, tmp_path, overrides=overrides)
        return
    if not judged:  # a judge option on a run that judges nothing is refused; without one, a bench's default stands
        config = run_config(values, tmp_path, overrides=overrides[:2])
        assert config.judge.name == (values["judge"]["name"] or task.judging.default)
    config = run_config(values, tmp_path, overrides=overrides) if judged else config
    assert isinstance(config, RunConfig) and config.backend.name == backend
    assert config.judge.name == resolved or not judged
    assert config.bench.spec.name == bench and config.bench.task is get_task(config.bench.spec.kind)


def test_builtin_bench_configs_name_their_kind() -> None:
    for task in BUILTIN:
        cfg = yaml.safe_load((CONF / "bench" / f"{task.kind}.yaml").read_text())
        assert cfg["kind"] == task.kind == cfg["name"]


SUBCOMMANDS = ["run", "analyze", "compare", "merge", "report", "view", "ls", "runs", "export"]


@pytest.mark.parametrize("command", [[], *([s] for s in SUBCOMMANDS)], ids=lambda c: " ".join(["probe", *c]))
def test_every_subcommand_answers_its_own_help(command: list[str]) -> None:
    """`probe SUB --help` prints SUB's own usage (not the run's), exit 0."""
    out = run_probe([*command, "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    name = command[0] if command else "run"
    assert f"probe {name}" in out.stdout
    if name not in ("run", "ls"):
        assert "model=" not in out.stdout.split("\n")[0], out.stdout[:300]


@pytest.mark.slow  # a new interpreter: the module's own `python -m` entry
def test_confgen_answers_help() -> None:
    out = subprocess.run([sys.executable, "-m", "probe.commands.confgen", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "confgen" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow  # a new process: the installed console script
def test_console_script_is_python_m_probe() -> None:
    script = Path(sys.executable).parent / "probe"
    if not script.is_file():
        pytest.skip("probe is not installed into this environment (pip install -e .)")
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == run_probe(["--help"], capture_output=True, text=True,
                                        timeout=120).stdout


@pytest.mark.slow  # a new interpreter: what importing probe loads
def test_import_probe_stays_light() -> None:
    code = ("import sys, probe, probe.api; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # the run API needs neither


WORD = "SP" + "EC"  # spelt apart, so that this file does not cite what it forbids
SPEC_REFERENCE = re.compile(rf"\b{WORD}\b")
"""A citation of a specification the project does not ship (the word in capitals, as in
"<word> §3"): the code cites the documentation page that covers the behaviour instead
(e.g. docs/benchmarks/ccd.md)."""


def _project_text_files() -> list[Path]:
    """The files that document or implement probe: its package, scripts, tests, docs, README."""
    files = [ROOT / "README.md"]
    for folder in ("probe", "scripts", "tests", "docs"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".sh", ".yaml"))
    return files


def spec_citations(text: str) -> list[int]:
    """Line numbers (1-based) of `text` that cite an unshipped specification by that word."""
    return [n for n, line in enumerate(text.splitlines(), 1) if SPEC_REFERENCE.search(line)]


def test_spec_citation_check_catches_one() -> None:
    assert spec_citations(f'"""DiSCo metrics ({WORD} §2)."""\nx = 1  # see {WORD}\n') == [1, 2]
    assert spec_citations(f"MODEL_{WORD} = 1\n_{WORD}IALS = ()\nspecs = {WORD}S\n") == []


def test_no_file_cites_an_unshipped_spec() -> None:
    """Behaviour is cited by the docs page that covers it, never by a file the project lacks."""
    found = [f"{path.relative_to(ROOT)}:{n}" for path in _project_text_files()
             for n in spec_citations(path.read_text(encoding="utf-8", errors="replace"))]
    assert not found, f"cite the docs page instead of {WORD} at: {', '.join(found)}"


def test_the_citation_file_names_this_version() -> None:
    """CITATION.cff (and the docs' BibTeX) carry the version `probe --version` prints."""
    from probe.version import __version__

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == __version__ and cff["authors"]
    assert f"version = {{{__version__}}}" in (ROOT / "docs/index.md").read_text()
