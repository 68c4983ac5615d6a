"""Round-6 reliability, one class each: a command writes into a folder it did not make only files
it owns; data becomes text through one escaping rule per output kind (CSV, markdown/HTML,
terminal); judge URLs are read by the URL libraries; a stored table's rows must be what a row can
be; every JSON/YAML reader is depth-bounded and every ordering key ranged; read-only and
non-UTF-8 places are one accurate line. Two tiny runs are shared by the module: a plain DiSCo one
and a GlobalOpinionQA one whose options and countries are an attacker's."""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_globalopinion_data import DD, row, write
from test_text_runs import _config

from probe.benches.globalopinion.data import parse_options
from probe.benches.orders import MAX_CAP, OrderDesign, orderings
from probe.bounded import MAX_DEPTH, check_depth, loads_json, loads_yaml
from probe.commands import analyze as analyze_command
from probe.commands import compare as compare_command
from probe.commands import export as export_command
from probe.commands import view as view_command
from probe.commands.runs import lines
from probe.errors import ProbeInputError
from probe.escape import inert_markdown, markdown_cell, spreadsheet_cell, terminal_text
from probe.judges.credentials import check_url, redact_url, redacted, split_credentials
from probe.pipeline.execute import run
from probe.pipeline.spec import run_config
from probe.prompts.factors import FactorError, load_levels
from probe.report.run_list import list_runs
from probe.report.summary import run_summary
from probe.benches.registry import task_of
from probe.results.layout import SAMPLES_PAGE, owner_mark
from probe.results.manifest import read_manifest
from probe.viz.html import markdown_to_html

EVIL_LINK = "[Evil](https://evil.example)"
EVIL_TERMINAL = "\x1b]0;PWNED\x07\x1b[2J"
FORMULAS = ("=cmd|' /C calc'!A0", "+SUM(1,2)|x")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished tiny-model DiSCo run, never modified (tests copy it to edit it)."""
    tmp = tmp_path_factory.mktemp("round6")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(tmp / "cache"))
        yield run(run_config(_config("bench.limit=2", "analysis.n_boot=20"), tmp / "sweep" / "run"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A GlobalOpinionQA run whose options are spreadsheet formulas and whose countries are a
    markdown link and a terminal escape sequence."""
    tmp = tmp_path_factory.mktemp("round6_hostile")
    shares = DD.format("{" + ", ".join(f"{c!r}: {v}" for c, v in
                                       ((EVIL_LINK, [0.6, 0.4]), (EVIL_TERMINAL, [0.25, 0.75]),
                                        ("Japan", [0.5, 0.5]))) + "}")
    data = write(tmp, [row(question=f"Q{i}?", selections=shares, options=repr(list(FORMULAS))) for i in range(3)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(tmp / "cache"))
        yield run(run_config(_config(f"bench.path={data}", "analysis.n_boot=20", bench="globalopinion"), tmp / "run"))


def _cli(main: Callable[[list[str]], object], argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:  # `probe view`'s main raises its status
        code = e.code
    return int(code or 0), capsys.readouterr().err


def _one_line(err: str) -> str:
    found = [line for line in err.splitlines() if line.strip()]
    assert len(found) == 1 and "Traceback" not in err, err
    return found[0]


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "edited"))


def _edit(path: Path, column: str, values: list[object], kind: pa.DataType) -> None:
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.column_names.index(column), column, pa.array(values, kind)), path)


# (1) a folder the command did not make: only files it owns

def test_view_never_replaces_a_users_own_samples_page(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = finished.parent
    mine = folder / SAMPLES_PAGE
    mine.write_bytes(b"<html>my own notes</html>\n")
    try:
        code, err = _cli(view_command.main, [str(folder)], capsys)
        assert code == 2 and "never replaces a file it does not own" in _one_line(err)
        assert mine.read_bytes() == b"<html>my own notes</html>\n" and not owner_mark(mine).exists()
    finally:
        mine.unlink()


def test_view_rewrites_its_own_page_and_a_runs_own(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = finished.parent
    try:
        for _ in range(2):  # the second call finds its own marker beside its own page
            code, _ = _cli(view_command.main, [str(folder)], capsys)
            assert code == 0 and (folder / SAMPLES_PAGE).read_text().startswith("<!DOCTYPE html>")
        assert owner_mark(folder / SAMPLES_PAGE).read_text() == "probe view\n"
        code, _ = _cli(view_command.main, [str(finished)], capsys)  # a run's page is in the run's layout
        assert code == 0 and not owner_mark(finished / SAMPLES_PAGE).exists()
    finally:
        (folder / SAMPLES_PAGE).unlink(missing_ok=True)
        owner_mark(folder / SAMPLES_PAGE).unlink(missing_ok=True)


# (2) one escaping rule per output kind

def test_escaping_rules() -> None:
    assert [spreadsheet_cell(t) for t in ("=1+1", "+x", "-x", "@x", "\tx", "\rx", "x=1", "")] == \
        ["'=1+1", "'+x", "'-x", "'@x", "'\tx", "'\rx", "x=1", ""]
    assert inert_markdown(f"{EVIL_LINK} <img src=x> p < 0.1 `<b>`\n| a |") == \
        "[Evil]\\(https://evil.example) &lt;img src=x> p < 0.1 `<b>`\n| a |"
    assert "\x1b" not in inert_markdown(EVIL_TERMINAL) and markdown_cell("a|b\nc") == "a\\|b\\nc"
    assert terminal_text(f"one {EVIL_TERMINAL}\ntwo") == "one \\x1b]0;PWNED\\x07\\x1b[2J\ntwo"
    for ordinary in ("United States", "Côte d'Ivoire", "p < 0.05", "[0.1, 0.2] (n=3)", "tiny_llama-1.5"):
        assert inert_markdown(ordinary) == ordinary == markdown_cell(ordinary) == terminal_text(ordinary)
    assert "<a " not in markdown_to_html(f"{EVIL_LINK} <https://evil.example>")


def test_csv_export_holds_no_formula_cell(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert export_command.main([str(hostile), "--format", "csv"]) == 0
    cells = [c for r in csv.reader(io.StringIO(capsys.readouterr().out)) for c in r]
    assert "'" + FORMULAS[0] in cells and "'" + FORMULAS[1] in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
    assert not [c for c in cells if c.startswith("-") and not _number(c)]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_reports_make_no_link_tag_or_escape_from_data(hostile: Path) -> None:
    page, markdown = (hostile / "report.html").read_text(), (hostile / "report.md").read_text()
    assert EVIL_LINK in page and re.findall(r"<a\b[^>]*>", page) == ['<a href="samples.html">']
    assert "](https://evil" not in markdown and "[Evil]\\(https://evil.example)" in markdown
    for text in (page, markdown, (hostile / SAMPLES_PAGE).read_text()):
        assert "\x1b" not in text and "\x07" not in text
    summary = run_summary(task_of(read_manifest(hostile)), json.loads((hostile / "metrics.json").read_text()))
    assert "\x1b" not in summary


# (3) credentials, read by the URL libraries

@pytest.mark.parametrize("url, host", [
    ("http://alice:hunter2@ss@127.0.0.1/v1", "127.0.0.1"),  # a raw @ in the password
    ("http://alice:p%40ss%2Fw@127.0.0.1:8000/v1", "127.0.0.1:8000"),  # percent-encoded
    ("https://tok@judge.example/v1", "judge.example"),
])
def test_every_userinfo_form_is_redacted(url: str, host: str) -> None:
    assert redact_url(url) == f"{url.split('://')[0]}://***@{host}/v1"
    text = redacted(f"probe 'judge.base_url={url}' x\nbase_url: {url}\n{json.dumps({'u': url})}")
    assert "hunter2" not in text and "ss@" not in text and "p%40ss" not in text and "tok@" not in text
    assert check_url(url) == url


def test_split_credentials_decodes_the_password() -> None:
    assert split_credentials("http://alice:hunter2@ss@127.0.0.1/v1") == ("http://127.0.0.1/v1", ("alice", "hunter2@ss"))
    assert split_credentials("http://alice:p%40ss%2Fw@h/v1")[1] == ("alice", "p@ss/w")


@pytest.mark.parametrize("url", ["http://alice:hun/ter2@127.0.0.1/v1", "http://alice:12/x@host/v1",
                                 "http://alice:pw#x@host/v1"])
def test_a_url_with_a_raw_slash_in_its_password_is_refused_without_showing_it(url: str, tmp_path: Path) -> None:
    assert "ter2" not in redacted(url) and "12/x" not in redacted(url) and "pw#x" not in redacted(url)
    with pytest.raises(ProbeInputError, match=r"judge.base_url: not a URL the judge can use") as refused:
        check_url(url)
    assert "ter2" not in str(refused.value) and "hun" not in str(refused.value) and "pw" not in str(refused.value)
    with pytest.raises(ProbeInputError, match=r"judge.base_url"):
        run_config(_config("judge=http", "judge.model=m", f"judge.base_url='{url}'", bench="locqa"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["ftp://h/v1", "http:///v1", "http://h:99999/v1", "http://h st/v1"])
def test_unusable_urls_are_refused(url: str) -> None:
    with pytest.raises(ProbeInputError, match=r"judge.base_url: not a URL the judge can use"):
        check_url(url)
    assert redacted(url) == url


# (4) a stored table's rows

def test_all_zero_letter_logprobs_are_refused_and_nothing_rewritten(finished: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    edited = _copy(finished, tmp_path)
    lists = pq.read_table(edited / "scores.parquet").column("letter_logprobs").to_pylist()
    lists[3] = [0.0] * len(lists[3])  # one prompt's letters each given probability 1
    _edit(edited / "scores.parquet", "letter_logprobs", lists, pa.list_(pa.float32()))
    before = _digests(edited)
    for main, argv in ((analyze_command.main, [str(edited)]), (compare_command.main, [str(finished), str(edited)]),
                       (export_command.main, [str(edited)]), (view_command.main, [str(edited)])):
        code, err = _cli(main, argv, capsys)
        line = _one_line(err)
        assert code == 2 and "scores.parquet is damaged (row of prompt_id 3, column letter_logprobs" in line, line
        assert "sum to 4" in line
    assert _digests(edited) == before


@pytest.mark.parametrize("column", ["greedy_valid", "letter_logprobs", "prompt_id"])
def test_a_scores_table_without_a_required_column_is_one_line(column: str, finished: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    edited = _copy(finished, tmp_path)
    pq.write_table(pq.read_table(edited / "scores.parquet").drop([column]), edited / "scores.parquet")
    for main, argv in ((analyze_command.main, [str(edited)]), (compare_command.main, [str(edited), str(finished)])):
        code, err = _cli(main, argv, capsys)
        assert code == 2 and f"scores.parquet is damaged (it has no {column} column" in _one_line(err)


@pytest.mark.parametrize("order", [[9, 9, 9, 9], [0, 0, 0, 0], [0, 1, 2, -1], [-1, 0, 1, 2], [0, 1, 2, 4]])
def test_an_order_that_is_no_permutation_is_refused(order: list[int], finished: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    edited = _copy(finished, tmp_path)
    rows = pq.read_table(edited / "prompts.parquet").num_rows
    orders = pq.read_table(edited / "prompts.parquet").column("order").to_pylist()
    orders[rows - 1] = order
    _edit(edited / "prompts.parquet", "order", orders, pa.list_(pa.int64()))
    code, err = _cli(analyze_command.main, [str(edited)], capsys)
    assert code == 2 and f"column order: {order} is not a permutation" in _one_line(err)


def test_a_padded_order_is_a_permutation_of_the_shown_options(finished: Path, tmp_path: Path) -> None:
    """GlobalOpinionQA pads a question with fewer options than the run's widest with −1."""
    from probe.results.integrity import check_orders

    edited = _copy(finished, tmp_path)
    rows = pq.read_table(edited / "prompts.parquet").num_rows
    _edit(edited / "prompts.parquet", "order", [[i % 2, 1 - i % 2, -1, -1] for i in range(rows)], pa.list_(pa.int64()))
    check_orders(edited)


# (5) depth and size bounds, ranges

def test_deep_values_are_refused_without_recursion(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ProbeInputError, match=rf"x: nested more than {MAX_DEPTH} levels"):
        loads_json(deep, "x")
    with pytest.raises(ProbeInputError, match=r"nested more than"):
        loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")  # parses, then the walk refuses
    with pytest.raises(ProbeInputError, match=r"y: nested more than"):
        loads_yaml("a: " + deep, "y")
    assert check_depth({"a": [[1]]}, "z") == {"a": [[1]]} and loads_yaml("a: [1, {b: 2}]", "y") == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize("suffix, text", [(".json", '{"cue": ' + "[" * 200_000 + "]" * 200_000 + "}"),
                                          (".yaml", "cue: " + "[" * 200_000 + "]" * 200_000 + "\n"),
                                          (".yaml", "cue:\n" + "".join("  " * i + "- \n" for i in range(1, 300)))])
def test_a_deep_levels_file_is_refused_and_no_run_directory_is_left(suffix: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / f"levels{suffix}"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(FactorError, match=r"nested more than 100 levels"):
        load_levels(path)
    with pytest.raises(ProbeInputError, match=r"nested more than"):
        run(run_config(_config("bench.limit=2", "factors=[cue]", f"factor_levels={path}"), tmp_path / "run"))
    assert time.perf_counter() - start < 20 and not (tmp_path / "run").exists()


def test_probe_runs_survives_a_deep_manifest_and_names_the_run(finished: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(finished, root / "good")
    shutil.copytree(finished, root / "deep")
    (root / "deep" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    found = {r.path.name: r.status for r in list_runs(root)}
    assert found["good"] == "done" and found["deep"].startswith("unreadable")
    assert any(line.endswith("deep") for line in lines(list_runs(root), root))


def test_a_deep_human_cell_is_one_line(hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edited = _copy(hostile, tmp_path)
    human = pq.read_table(edited / "prompts.parquet").column("human").to_pylist()
    human[0] = "[" * 100_000 + "]" * 100_000
    _edit(edited / "prompts.parquet", "human", human, pa.string())
    for main, argv in ((analyze_command.main, [str(edited)]), (export_command.main, [str(edited)]),
                       (view_command.main, [str(edited)])):
        code, err = _cli(main, argv, capsys)
        line = _one_line(err)
        assert code == 2 and ("column 'human'" in line or "field 'human'" in line) and "nested more than" in line


@pytest.mark.parametrize("override, message", [
    ("bench.orders_seed=-1", "bench.orders_seed: -1 is out of range"),
    (f"bench.orders_cap={MAX_CAP + 1}", f"bench.orders_cap: {MAX_CAP + 1} is out of range"),
    ("bench.orders_cap=4000000", "bench.orders_cap: 4000000 is out of range"),
    (f"bench.orders_sample={MAX_CAP + 1}", "bench.orders_sample"),
])
def test_ordering_keys_have_their_range(override: str, message: str, tmp_path: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(ProbeInputError, match=message):
        run(run_config(_config("bench.limit=2", "bench.orders=permutations", "dry_run=true", override),
                       tmp_path / "run"))
    assert time.perf_counter() - start < 10 and not (tmp_path / "run").exists()


def test_a_sample_of_22_factorial_orderings_is_drawn_without_overflow() -> None:
    drawn = orderings(22, OrderDesign("permutations", sample=5, seed=3))
    assert drawn.sampled and len(set(drawn.orders)) == 5
    assert all(sorted(o) == list(range(22)) for o in drawn.orders)
    assert drawn == orderings(22, OrderDesign("permutations", sample=5, seed=3))  # seeded
    small = orderings(7, OrderDesign("permutations", sample=5, seed=3))  # below 2**63: numpy's draw, as before
    assert small.orders[0] == (0, 4, 3, 6, 5, 2, 1)  # what the draw gave before this change


# (6) read-only and non-UTF-8 places; GlobalOpinionQA's options

def test_a_read_only_run_is_one_line(finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only mount (EROFS) as the kernel reports it; root ignores permission bits, so the
    refusal is injected at `os.open`, where every write of probe starts."""
    edited = _copy(finished, tmp_path)
    real = os.open

    def read_only(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if str(path).startswith(str(edited)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    before = _digests(edited)
    monkeypatch.setattr(os, "open", read_only)
    for main, argv in ((analyze_command.main, [str(edited), "analysis.temperature=0.5"]),
                       (view_command.main, [str(edited)])):
        code, err = _cli(main, argv, capsys)
        assert code == 2 and "cannot write" in _one_line(err) and "Read-only file system" in err
    monkeypatch.undo()
    assert _digests(edited) == before


def test_a_good_run_at_a_non_utf8_path_is_not_called_damaged(finished: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    odd = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9"))
    shutil.copytree(finished, odd / "run")
    for main in (analyze_command.main, export_command.main):
        code, err = _cli(main, [str(odd / "run")], capsys)
        assert code == 0 and "damaged" not in err, err


def test_globalopinion_refuses_two_identical_options() -> None:
    with pytest.raises(ProbeInputError, match=r"row 2, field 'options': option 3 \('yes'\) repeats option 1"):
        parse_options("['Yes', 'No', 'yes']", "row 2")
    assert parse_options("['Yes', 'No']", "row 2") == ["Yes", "No"]
