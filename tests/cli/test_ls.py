"""Discoverability and errors in probe's voice: `probe ls`, `--help` with descriptions, and one
line for a misspelt key (with the nearest valid one) or an unknown entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import probe_env, run_probe

from probe.commands.overrides import check
from probe.config import package_conf_dir
from probe.errors import ProbeInputError

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF = package_conf_dir()


def _probe(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_probe([*args], cwd=REPO_ROOT, env=env or probe_env(cache),
                          capture_output=True, text=True, timeout=600)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The run stopped with exit 2 and exactly one line on stderr, in probe's voice."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("probe: error: ")
    return lines[0]


def _unwrapped(out: str) -> list[str]:
    """The printed lines with each wrapped description back on its entry's or key's line."""
    lines: list[str] = []
    for line in out.splitlines():
        if line.startswith("      ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def test_ls_lists_every_entry_of_every_group_with_a_description(tmp_path: Path) -> None:
    proc = _probe("ls", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert max(map(len, proc.stdout.splitlines())) <= 100  # long descriptions wrap under their column
    lines = _unwrapped(proc.stdout)
    for group, plural in (("model", "models"), ("bench", "benches"), ("backend", "backends"), ("judge", "judges"),
                          ("intervention", "interventions")):
        assert f"{plural} ({group}=NAME)" in lines
        for entry in sorted(p.stem for p in (CONF / group).glob("*.yaml")):
            assert any(line.split()[:1] == [entry] for line in lines if line.startswith("  ")), (group, entry)
    row = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert row["qwen3-8b"].split()[1:3] == ["instruct", "Qwen/Qwen3-8B"]
    assert row["tiny"].endswith("a 2-layer random Llama with a tokenizer trained on the fly.")
    assert row["vllm"].endswith("from a vLLM engine (install: see README).")  # its spec's docstring
    assert "open questions in 12 languages" in row["locqa"]  # from LocQASpec's docstring, via its YAML header


def test_ls_one_group_and_one_entrys_keys(tmp_path: Path) -> None:
    proc = _probe("ls", "benches", "bench=locqa", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "benches (bench=NAME)" in out and "models (model=NAME)" not in out
    keys = {line.split("=")[0].strip(): line for line in _unwrapped(out) if line.startswith("  bench.")}
    assert set(keys) == {f"bench.{k}" for k in yaml.safe_load((CONF / "bench" / "locqa.yaml").read_text())} | {
        "bench.shard"}
    assert keys["bench.limit"].endswith("an integer ≥ 1 or null. Ask only the first N templates (after the filters; "
                                        "smoke tests); null = all.")
    assert "one of ['zero_shot', 'three_shot', 'explicit']." in keys["bench.mode"]


def test_ls_names_the_nearest_group_or_entry(tmp_path: Path) -> None:
    assert _one_error_line(_probe("ls", "modls", cache=tmp_path)).startswith(
        "probe: error: ls modls: no such group; did you mean `models`?")
    line = _one_error_line(_probe("ls", "bench=locqaa", cache=tmp_path))
    assert "bench=locqaa: no such entry of bench; did you mean `bench=locqa`?" in line


def test_help_describes_the_keys_of_the_selected_entries(tmp_path: Path) -> None:
    """Hydra's --help printed the composed YAML without a word on any key."""
    proc = _probe("bench=locqa", "backend=vllm", "--help", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {line.split("=")[0].strip(): line for line in proc.stdout.splitlines() if "=" in line}
    assert "Ask only the first N templates" in lines["bench.limit"]
    assert "Share of GPU memory vLLM may take." in lines["backend.gpu_memory_utilization"]
    assert "Bootstrap resamples" in lines["analysis.n_boot"] and "an integer ≥ 1." in lines["shard_size"]
    assert "Keys of this selection (model=smollm2-135m bench=locqa backend=vllm judge=auto intervention=none)" \
        in proc.stdout
    assert "bench.conditions" not in lines  # the default bench's keys are not shown for another bench


@pytest.mark.parametrize("override, expected", [
    ("bench.limt=3", "bench.limt=3: bench (demo) has no key 'limt'; did you mean `bench.limit`?"),
    ("backend.batch_token=4096", "backend.batch_token=4096: backend (hf) has no key 'batch_token'; did you mean "
                                 "`backend.batch_tokens`?"),
    ("dryrun=true", "dryrun=true: the config has no key 'dryrun'; did you mean `dry_run`?"),
    ("backend.gpu_memory_utilization=0.5", "it is a key of backend=vllm, not of backend=hf"),
    ("bench=locqaa", "bench=locqaa: no such entry of bench; did you mean `bench=locqa`?"),
])
def test_a_misspelt_key_is_one_line_naming_the_nearest(override: str, expected: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    line = _one_error_line(_probe("model=tiny", override, f"hydra.run.dir={out}", cache=tmp_path))
    assert expected in line
    assert "+" not in line and "not in struct" not in line  # never Hydra's advice to append the key
    assert not out.exists()


def test_a_misspelt_key_in_a_sweep_stops_before_any_job(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = _probe("-m", "model=tiny,tiny-gemma3", "bench=demo,locqa", "bench.limt=1,2", f"hydra.sweep.dir={sweep}",
                  cache=tmp_path)
    assert "did you mean `bench.limit`?" in _one_error_line(proc)
    assert not sweep.exists()


def test_a_spec_key_its_entry_leaves_unset_is_accepted(tmp_path: Path) -> None:
    """`model.attn_implementation=eager` is a ModelSpec key no model YAML sets: Hydra refused it
    (not in struct) though the README documents such overrides."""
    out = tmp_path / "run"
    proc = _probe("model=tiny", "bench=demo", "bench.limit=1", "bench.conditions=[C0]", "analysis.n_boot=20",
                  "progress=false", "model.attn_implementation=eager", f"hydra.run.dir={out}", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert yaml.safe_load((out / ".hydra" / "config.yaml").read_text())["model"]["attn_implementation"] == "eager"
    assert json.loads((out / "manifest.json").read_text())["model"]["attn_implementation"] == "eager"


def test_check_leaves_valid_and_hydras_own_overrides_alone() -> None:
    from probe.commands.overrides import check

    argv = ["-m", "model=tiny,tiny-gemma3", "bench=demo", "bench.limit=1,2", "+foo=1", "++backend.seed=3",
            "~cluster", "hydra.run.dir=x", "hydra/job_logging=default", "analysis.n_boot=10", "bench.conditions=[C0]"]
    assert check(argv).argv == argv
    assert check(["model=hub", "model.quantization=4bit"]).argv == ["model=hub", "++model.quantization=4bit"]


def test_a_renamed_key_is_read_under_its_new_name_with_a_notice(capsys: pytest.CaptureFixture[str]) -> None:
    """`intervention.culture` (the steered group's old key) is read as `intervention.group`, sweeps
    included, with one line saying so; other keys pass untouched."""
    from probe.commands.overrides import check

    argv = ["-m", "intervention=steer", "intervention.culture=China,Spain", "bench.limit=1"]
    assert check(argv).argv == ["-m", "intervention=steer", "intervention.group=China,Spain", "bench.limit=1"]
    assert capsys.readouterr().err == ("probe: note: intervention.culture is now intervention.group; read as "
                                       "intervention.group=China,Spain\n")


def test_probe_view_is_dispatched_before_hydra(monkeypatch: pytest.MonkeyPatch) -> None:
    view = pytest.importorskip("probe.commands.view")
    import probe.__main__ as entry

    seen: list[list[str]] = []
    monkeypatch.setattr(view, "main", lambda argv: seen.append(list(argv)) or 0)
    monkeypatch.setattr(sys, "argv", ["probe", "view", "runs/x", "--out", "y"])
    with pytest.raises(SystemExit) as stop:
        entry.main()
    assert stop.value.code == 0 and seen == [["runs/x", "--out", "y"]]


@pytest.mark.slow  # a new process: the installed console script
def test_console_script_runs_ls(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "probe"
    if not script.is_file():
        pytest.skip("probe is not installed into this environment (pip install -e .)")
    proc = subprocess.run([str(script), "ls", "judges"], capture_output=True, text=True, timeout=300,
                          env=probe_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "judges (judge=NAME)" and "  rules" in proc.stdout


def test_an_unknown_plus_key_names_the_nearest_too() -> None:
    """`+backend.batch_tokns=8` passes Hydra; the typed config names the key it meant."""
    from probe.backends.specs import HFBackendSpec
    from probe.config import build
    from probe.errors import ProbeInputError

    with pytest.raises(ProbeInputError, match=r"^backend: unknown key\(s\) \['batch_tokns'\]; did you mean "
                                              r"'batch_tokens'\? valid keys: \["):
        build(HFBackendSpec, {"batch_tokns": 8}, "backend")


@pytest.mark.parametrize("argv, expected", [
    (["model=tiny", "limit=2"], "limit=2: the config has no key 'limit'; did you mean `bench.limit`?"),
    (["model=tiny", "bench.limit: 2"], "'bench.limit: 2': not an override of the form key=value; "
                                       "did you mean `bench.limit=2`?"),
    (["model=tiny", "bench.limit=[1"], "'bench.limit=[1': not an override of the form key=value;"),
])
def test_a_bare_key_and_a_yaml_style_override_name_the_fix(argv: list[str], expected: str) -> None:
    with pytest.raises(ProbeInputError) as stop:
        check(argv)
    assert str(stop.value).startswith(expected) and "\n" not in str(stop.value)


def test_version_is_probes_and_every_subcommand_errs_with_one_prefix(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import probe
    import probe.__main__ as entry

    monkeypatch.setattr(sys, "argv", ["probe", "--version"])
    entry.main()
    assert capsys.readouterr().out == f"probe {probe.__version__}\n"
    for name in ("analyze", "compare", "export", "merge", "report", "runs", "view"):
        monkeypatch.setattr(sys, "argv", ["probe", name, "--no-such-flag"])
        with pytest.raises(SystemExit) as stop:
            entry.main()
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith("probe: error: ") and err.count("\n") == 1, (name, err)


def test_the_public_api_is_exported_from_probe() -> None:
    import probe
    from probe.commands import compare

    assert {"load_run", "paired_difference", "compare_runs", "recompute_metrics"} <= set(probe.__all__)
    assert probe.paired_difference.__doc__ and compare.paired_difference.__doc__
