"""Round-4 reliability: no command writes through a planted link or over files it did not write
(`out=` directories carry the command's own mark), a damaged finished run fails in one line
naming the run and the file (and is not "complete"), impossible stored scores are refused, and
a few malformed inputs end in one line instead of a traceback. One tiny run is shared by all."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from probe.commands import analyze, compare, ls, report, view
from probe.config import package_conf_dir
from probe.errors import ProbeInputError
from probe.pipeline.execute import run
from probe.pipeline.spec import run_config

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

OVERRIDES = ["model=tiny", "bench=demo", "bench.limit=2", "analysis.n_boot=20", "progress=false"]


def _config(*extra: str) -> dict:  # type: ignore[type-arg]
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*OVERRIDES, *extra])
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    return values


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished tiny-model DiSCo run (letters), never modified: tests work on copies."""
    tmp = tmp_path_factory.mktemp("damaged")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(tmp / "cache"))
        yield run(run_config(_config(), tmp / "run"))


@pytest.fixture
def copy(finished: Path, tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        return Path(shutil.copytree(finished, tmp_path / name, symlinks=True))
    return make


def _cli(main: Callable[[list[str]], object], argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit status and stderr of a command run in-process."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    return int(code or 0), capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# (1) every write through the no-follow writer

@pytest.mark.parametrize("marked", [False, True])
def test_the_sweep_report_refuses_a_planted_report_md_link(marked: bool, copy: Callable[[str], Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """(Before: the sweep report wrote report.md through the link, exit 0.)"""
    sweep = tmp_path / "sweep"
    shutil.copytree(copy("r0"), sweep / "r0", symlinks=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    (sweep / "report").mkdir()
    if marked:  # a directory holding an earlier sweep report: the link is still refused
        (sweep / "report" / ".probe-output").write_text("probe report\n")
    (sweep / "report" / "report.md").symlink_to(outside)
    code, err = _cli(report.main, [str(sweep)], capsys)
    assert code == 2 and "report.md" in _one_line(err)
    assert outside.read_text() == "mine\n" and sorted(p.name for p in (sweep / "report").iterdir()) == \
        sorted(["report.md", *([".probe-output"] if marked else [])])


# (5) out= writes only into a directory the command created or holds its own output

@pytest.mark.parametrize(("command", "args", "name"), [
    (view.main, [], "samples.html"), (report.main, [], "report.md"), (compare.main, ["SAME"], "compare.json")])
def test_out_refuses_a_directory_holding_files_the_command_did_not_write(
        command: Callable[[list[str]], object], args: list[str], name: str, finished: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """(Before: each replaced the user's own file.)"""
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text("my own notes\n")
    argv = [str(finished), *[str(finished) for _ in args]]
    code, err = _cli(command, [*argv, f"out={out}"], capsys)
    assert code == 2 and f"{out / name}: " in _one_line(err)
    assert (out / name).read_text() == "my own notes\n" and [p.name for p in out.iterdir()] == [name]
    fresh = tmp_path / "fresh"
    for _ in range(2):  # a new directory, then the command's own earlier output
        code, err = _cli(command, [*argv, f"out={fresh}"], capsys)
        assert code == 0, err
    assert (fresh / name).is_file() and (fresh / ".probe-output").read_text() == f"probe {command.__module__.split('.')[-1]}\n"
    code, err = _cli(command, [*argv, f"out={fresh / name}"], capsys)  # a file as out: one line
    assert code == 2 and "is a file, not a directory" in _one_line(err)


def test_a_report_into_another_finished_run_is_refused(finished: Path, copy: Callable[[str], Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    other = copy("other")
    before = {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()}
    code, err = _cli(report.main, [str(finished), f"out={other}"], capsys)
    assert code == 2 and str(other) in _one_line(err)
    assert {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()} == before


# (6) a damaged finished run fails in one line naming the run and the file

def _cut(path: Path, keep: int = 500) -> None:
    path.write_bytes(path.read_bytes()[:keep])


DAMAGES: dict[str, Callable[[Path], None]] = {
    "metrics.json": lambda d: _cut(d / "metrics.json"),
    "manifest.json": lambda d: (d / "manifest.json").write_text("[1, 2]\n"),
    "prompts.parquet": lambda d: _cut(d / "prompts.parquet", 3000),
    "scores.parquet": lambda d: _cut(d / "scores.parquet", 3000),
}


@pytest.mark.parametrize("damaged", sorted(DAMAGES))
def test_a_damaged_file_is_one_line_naming_the_run_and_the_file(damaged: str, finished: Path,
                                                                copy: Callable[[str], Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """view, compare and analyze. (Before: a truncated parquet was an ArrowInvalid traceback; a
    `[1,2]` manifest or a cut metrics.json named the file but not the run.)"""
    bad = copy("bad")
    DAMAGES[damaged](bad)
    for main, argv in ((view.main, [str(bad)]), (compare.main, [str(finished), str(bad)]),
                       (analyze.main, [str(bad), "analysis.n_boot=10"])):
        code, err = _cli(main, argv, capsys)
        assert code == 2, (main, err)
        assert str(bad / damaged) in _one_line(err).replace(f"{bad}: {damaged}", str(bad / damaged)), err


def test_a_finished_run_with_a_damaged_table_is_not_complete(copy: Callable[[str], Path],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """Rerunning its command refuses it in one line. (Before: "already complete; nothing to do".)"""
    bad = copy("rerun")
    _cut(bad / "scores.parquet", 3000)
    with pytest.raises(ProbeInputError, match=r"scores.parquet is damaged \(not a readable parquet file"):
        run(run_config(_config(), bad))
    assert "nothing to do" not in caplog.text


def test_a_cut_metrics_json_is_recomputed_by_the_rerun(finished: Path, copy: Callable[[str], Path]) -> None:
    done = copy("metrics")
    _cut(done / "metrics.json")
    run(run_config(_config(), done))
    assert (done / "metrics.json").read_bytes() == (finished / "metrics.json").read_bytes()


# lower items

def _edit_scores(run_dir: Path, edit: Callable[[list[list[float]]], None]) -> None:
    table = pq.read_table(run_dir / "scores.parquet")
    values = table.column("letter_logprobs").to_pylist()
    edit(values)
    i = table.column_names.index("letter_logprobs")
    field = table.schema.field(i)
    pq.write_table(table.set_column(i, field, pa.array(values, field.type)), run_dir / "scores.parquet")


@pytest.mark.parametrize(("label", "edit", "message"), [
    ("plus5", lambda v: v[3].__setitem__(0, 5.0), r"1 of its letter_logprobs are above 0 \(largest 5\)"),
    ("huge", lambda v: v[3].__setitem__(0, 3e38), r"1 of its letter_logprobs are above 0 \(largest 3e\+38\)"),
    ("ragged", lambda v: v[3].pop(), r"its letter_logprobs lists are ragged: rows hold 3 to 4 values"),
])
def test_impossible_or_ragged_stored_scores_are_refused(label: str, edit: Callable[[list[list[float]]], None],
                                                        message: str, copy: Callable[[str], Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """(Before: +5 was analysed; a ragged list was a ValueError traceback.)"""
    bad = copy(label)
    _edit_scores(bad, edit)
    from probe.results.run import load_run

    with pytest.raises(ProbeInputError, match=f"{bad}: scores.parquet is damaged .*{message}"):
        load_run(bad)
    code, err = _cli(analyze.main, [str(bad)], capsys)
    assert code == 2 and "scores.parquet is damaged" in _one_line(err)


def test_too_few_bootstrap_resamples_are_refused(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(Before: n_boot=1 printed a "95% CI" that did not contain its estimate.)"""
    code, err = _cli(analyze.main, [str(finished), "analysis.n_boot=1"], capsys)
    assert code == 2 and "analysis.n_boot: 1 is out of range; expected a value 0 or ≥ 10" in _one_line(err)
    with pytest.raises(ProbeInputError, match="analysis.n_boot: 5 is out of range"):
        run_config(_config("analysis.n_boot=5"), Path("unused"))


def test_report_md_writes_markup_in_group_names_as_text(copy: Callable[[str], Path]) -> None:
    """(Before: report.md kept `<img …>` from a culture's name as raw HTML.)"""
    from probe.pipeline.analysis import analyze_run

    marked = copy("markup")
    prompts = pq.read_table(marked / "prompts.parquet")
    evil = "<img src=x onerror=alert(1)>"
    groups = [[evil if g == "Spain" else g for g in row] for row in prompts.column("groups").to_pylist()]
    i = prompts.column_names.index("groups")
    pq.write_table(prompts.set_column(i, prompts.schema.field(i), pa.array(groups, prompts.schema.field(i).type)),
                   marked / "prompts.parquet")
    analyze_run(marked)
    text = (marked / "report.md").read_text()
    assert "&lt;img src=x" in text and "<img" not in text


def test_the_inert_html_rule() -> None:
    from probe.viz.markdown import inert_html

    assert inert_html("a <b>x</b> & p < 0.001, `<kept>` <!-- c -->") == "a &lt;b>x&lt;/b> & p < 0.001, `<kept>` &lt;!-- c -->"


def test_malformed_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`probe ls 'bench=['`, `bench.url='::::'`, a deeply nested JSON cell, a killed run's directory.
    (Before: tracebacks; the killed run read "not a probe run directory".)"""
    from probe.benches.disco.data import _letter_object
    from probe.benches.sources import fetch
    from probe.results.run import load_run

    code, err = _cli(ls.main, ["bench=["], capsys)
    assert code == 2 and "bench=[" in _one_line(err)
    with pytest.raises(ProbeInputError, match=r"bench.url: '::::' is not a URL"):
        fetch(None, "::::", None, tmp_path / "cache")
    with pytest.raises(ProbeInputError, match=r"line 2, field 'Options': JSON nested too deeply"):
        _letter_object("[" * 100_000, "line 2", "Options")
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "run_key.json").write_text(json.dumps({"model": "tiny"}))
    with pytest.raises(ProbeInputError, match=r"an unfinished probe run \(no manifest.json yet"):
        load_run(killed)
    assert os.listdir(tmp_path) == ["killed"]
