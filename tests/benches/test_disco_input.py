"""DiSCo input: the loader rejects malformed CSVs with a precise message, the CLI turns that
into exit status 2, and `build_prompts` expands each valid item into the 52-prompt design."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import COLUMNS, disco_rows, run_probe, write_csv

from probe.benches.disco.data import DEFAULT_INSTRUCTIONS, build_prompts, load_items
from probe.errors import ProbeInputError
from probe.types import Item, Prompt

REPO_ROOT = Path(__file__).resolve().parents[2]
FORMAT_LINE = ('Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} '
               "(where X is one of A, B, C, D).")
Builder = Callable[[Path], Path]

# Row 1 of disco_rows(3) is item-1 on CSV line 3; it shows Assam, China, Ethiopia, Greece at A-D.
ROW1 = ("line 3", "ID 'item-1'")


def set_cell(field: str, value: object, row: int = 1) -> Builder:
    """A 3-row CSV whose cell (row, field) is replaced; non-strings are JSON-encoded."""
    def build(path: Path) -> Path:
        rows = disco_rows(3)
        rows[row][field] = value if isinstance(value, str) else json.dumps(value)
        return write_csv(path, rows)
    return build


def drop_column(column: str) -> Builder:
    return lambda path: write_csv(path, disco_rows(3), [c for c in COLUMNS if c != column])


def raw(transform: Callable[[str], str]) -> Builder:
    """A 3-row CSV whose text is rewritten by `transform` (for files csv.DictWriter cannot make)."""
    def build(path: Path) -> Path:
        text = write_csv(path, disco_rows(3)).read_text(encoding="utf-8")
        path.write_text(transform(text), encoding="utf-8")
        return path
    return build


def empty_file(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def add_cell_to_line(n: int) -> Callable[[str], str]:
    def transform(text: str) -> str:
        lines = text.splitlines(keepends=True)
        lines[n - 1] = lines[n - 1].rstrip("\r\n") + ",surplus\r\n"
        return "".join(lines)
    return transform


META1 = {"A": "Assam", "B": "China", "C": "Ethiopia", "D": "Greece"}
OPTS = {L: f"option {L}" for L in "ABCD"}

MALFORMED: list[tuple[str, Builder, tuple[str, ...]]] = [
    ("missing-Metadata", drop_column("Metadata"), ("missing column", "['Metadata']")),
    ("missing-Context_L3", drop_column("Context_L3"), ("missing column", "['Context_L3']")),
    ("invalid-json-Options", set_cell("Options", '{"A": "x", "B": '),
     (*ROW1, "field 'Options'", "invalid JSON")),
    ("invalid-json-Metadata", set_cell("Metadata", "{A: Assam}"),
     (*ROW1, "field 'Metadata'", "invalid JSON")),
    ("3-options", set_cell("Options", {L: f"option {L}" for L in "ABC"}),
     (*ROW1, "field 'Options'", "expected 4 options", "got 3")),
    ("5-options", set_cell("Options", {L: f"option {L}" for L in "ABCDE"}),
     (*ROW1, "field 'Options'", "expected 4 options", "got 5")),
    ("metadata-keys-ABCE", set_cell("Metadata", {**{k: META1[k] for k in "ABC"}, "E": "Greece"}),
     (*ROW1, "field 'Metadata'", "expected keys A, B, C, D", "got ['A', 'B', 'C', 'E']")),
    ("lowercase-option-keys", set_cell("Options", {L.lower(): t for L, t in OPTS.items()}),
     (*ROW1, "field 'Options'", "expected keys A, B, C, D", "got ['a', 'b', 'c', 'd']")),
    ("duplicate-ID", set_cell("ID", "item-0", row=2),
     ("line 4", "ID 'item-0'", "field 'ID'", "duplicate", "first seen at line 2")),
    ("empty-culture", set_cell("Metadata", {**META1, "B": ""}),
     (*ROW1, "field 'Metadata' key 'B'", "empty culture label", "expected one of")),
    ("unknown-culture", set_cell("Metadata", {**META1, "C": "Atlantis"}),
     (*ROW1, "field 'Metadata' key 'C'", "unknown culture 'Atlantis'", "expected one of")),
    ("empty-file", empty_file, ("empty file", "expected a header")),
    ("header-only", raw(lambda text: text.splitlines(keepends=True)[0]), ("no data rows",)),
    ("ragged-row", raw(add_cell_to_line(3)), ("line 3", "more cells than header columns", "(11 columns expected)")),
    ("empty-Question", set_cell("Question", "   "), (*ROW1, "field 'Question'", "empty")),
    ("repeated-json-key", set_cell("Options", '{"A": "x", "A": "y", "B": "b", "C": "c", "D": "d"}'),
     (*ROW1, "field 'Options'", "duplicate key(s) ['A']")),
    ("not-utf8", lambda p: (write_csv(p, disco_rows(3)), p.write_bytes(p.read_bytes().replace(b"item-1", b"item-\xe9")))[0],
     ("not valid UTF-8",)),
]


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    """Spreadsheet exports often start with a byte-order mark; it is not part of the header."""
    path = write_csv(tmp_path / "bom.csv", disco_rows(2))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [i.item_id for i in load_items(path)] == ["item-0", "item-1"]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_load_items_rejects_malformed(tmp_path: Path, build: Builder, expected: tuple[str, ...]) -> None:
    path = build(tmp_path / "bad.csv")
    with pytest.raises(ProbeInputError) as info:
        load_items(path)
    message = str(info.value)
    assert message.startswith(str(path))
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# --- valid input -------------------------------------------------------------------------


def test_extra_columns_are_kept(tmp_path: Path) -> None:
    rows = [{**r, "Region": f"region {i}"} for i, r in enumerate(disco_rows(2))]
    items = load_items(write_csv(tmp_path / "extra.csv", rows, [*COLUMNS, "Region"]))
    assert [dict(item.extra)["Region"] for item in items] == ["region 0", "region 1"]
    assert dict(items[0].extra)["QID"] == "Q-0"


def test_missing_instructions_column_uses_default(disco_csv: Path) -> None:
    items = load_items(disco_csv)
    assert all(item.instructions is None for item in items)
    assert all(f"Instructions: {DEFAULT_INSTRUCTIONS}" in p.message.splitlines() for p in build_prompts(items))


def test_instructions_column_overrides_default(tmp_path: Path) -> None:
    rows = [{**r, "Instructions": "Pick one letter."} for r in disco_rows(1)]
    items = load_items(write_csv(tmp_path / "instr.csv", rows, [*COLUMNS, "Instructions"]))
    assert "Instructions: Pick one letter." in build_prompts(items)[0].message.splitlines()


@pytest.fixture
def design(disco_csv: Path) -> tuple[list[Item], list[Prompt]]:
    items = load_items(disco_csv)
    return items, build_prompts(items)


def option_lines(message: str) -> list[str]:
    """The four `X. text` lines after `Options:`."""
    lines = message.splitlines()
    start = lines.index("Options:") + 1
    return lines[start:start + 4]


def test_52_prompts_per_item(design: tuple[list[Item], list[Prompt]]) -> None:
    items, prompts = design
    assert len(prompts) == 52 * len(items)
    assert [p.prompt_id for p in prompts] == list(range(len(prompts)))
    for item in items:
        counts = Counter(p.value("condition") for p in prompts if p.item_id == item.item_id)
        assert counts == {"C0": 4, "C1": 16, "C2": 16, "C3": 16}


def test_each_culture_is_target_four_times(design: tuple[list[Item], list[Prompt]]) -> None:
    items, prompts = design
    for item in items:
        cultures = {o.group for o in item.options}
        assert len(cultures) == 4
        for condition in ("C1", "C2"):
            targets = Counter(p.value("target") for p in prompts
                              if p.item_id == item.item_id and p.value("condition") == condition)
            assert targets == {c: 4 for c in cultures}
        assert {p.value("target") for p in prompts if p.value("condition") in ("C0", "C3")} == {None}


def test_rotation_k_shows_option_i_plus_k_at_letter_i(design: tuple[list[Item], list[Prompt]]) -> None:
    items, prompts = design
    by_id = {item.item_id: item for item in items}
    for p in prompts:
        item, k = by_id[p.item_id], p.value("rotation")
        assert p.order == tuple((i + k) % 4 for i in range(4))
        assert p.groups == tuple(item.options[o].group for o in p.order)
        expected = [f"{L}. {item.options[(i + k) % 4].text}" for i, L in enumerate("ABCD")]
        assert option_lines(p.message) == expected


def test_c3_context_line_1_is_fact_of_letter_j(design: tuple[list[Item], list[Prompt]]) -> None:
    items, prompts = design
    by_id = {item.item_id: item for item in items}
    c3 = [p for p in prompts if p.value("condition") == "C3"]
    assert {(p.value("rotation"), p.value("ctx_rotation")) for p in c3} == {(k, j) for k in range(4) for j in range(4)}
    for p in c3:
        item, j = by_id[p.item_id], p.value("ctx_rotation")
        assert j is not None
        lines = p.message.splitlines()
        start = lines.index("Context:") + 1
        context = lines[start:start + 4]
        shown_at_j = option_lines(p.message)[j].split(". ", 1)[1]
        option = next(o for o in item.options if o.text == shown_at_j)
        assert context[0] == f"1. {option.context}"
        assert sorted(line.split(". ", 1)[1] for line in context) == sorted(o.context for o in item.options)
    assert {p.value("ctx_rotation") for p in prompts if p.value("condition") != "C3"} == {None}


def test_message_lines_per_condition(design: tuple[list[Item], list[Prompt]]) -> None:
    items, prompts = design
    by_id = {item.item_id: item for item in items}
    for p in prompts:
        item, lines = by_id[p.item_id], p.message.splitlines()
        assert lines[0] == f"Question: {item.question}"
        assert lines[-1] == FORMAT_LINE
        info = f"User info: The user is located in {p.value('target')}."
        instruction = f"User instruction: {item.user_instruction}"
        if p.value("condition") == "C0":
            assert not any(line.startswith(("User info:", "User instruction:", "Context:")) for line in lines)
        if p.value("condition") == "C1":
            assert lines[1] == info and not any(line.startswith("User instruction:") for line in lines)
        if p.value("condition") == "C2":
            assert lines[1:3] == [info, instruction]
        if p.value("condition") == "C3":
            assert lines[1] == "Context:" and not any(line.startswith("User info:") for line in lines)


# --- CLI -----------------------------------------------------------------------------------

CLI_CASES = {c[0]: c for c in MALFORMED}


@pytest.mark.parametrize("case", ["missing-Metadata", "invalid-json-Options", "duplicate-ID", "empty-file"])
def test_cli_exits_2_on_bad_input(tmp_path: Path, case: str) -> None:
    _, build, expected = CLI_CASES[case]
    path = build(tmp_path / "bad.csv")
    run_dir = tmp_path / "run"
    result = run_probe(["model=tiny", "bench=disco", f"bench.path={path}", f"hydra.run.dir={run_dir}", "progress=false"],
                       cwd=REPO_ROOT, env={**os.environ, "PROBE_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    assert "probe: error:" in result.stderr and "Traceback" not in result.stderr
    assert str(path) in result.stderr
    for fragment in expected:
        assert fragment in result.stderr, f"{fragment!r} not in {result.stderr!r}"
    assert not (run_dir / "scores.parquet").exists()
    assert not (run_dir / "prompts.parquet").exists()


def test_a_repeated_header_column_is_an_error(tmp_path: Path) -> None:
    """csv.DictReader would let the second `ID` column silently become the ids."""
    path = tmp_path / "dup.csv"
    rows = disco_rows(2)
    header = list(rows[0]) + ["ID"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([*r.values(), f"other-{r['ID']}"])
    with pytest.raises(ProbeInputError, match=r"dup.csv: line 1 \(header\): column\(s\) \['ID'\] appear more than once"):
        load_items(path)


def test_an_oversized_field_names_its_line(tmp_path: Path) -> None:
    rows = disco_rows(3)
    rows[1]["Question"] = "x" * (csv.field_size_limit() + 10)
    path = write_csv(tmp_path / "big.csv", rows)
    with pytest.raises(ProbeInputError, match=r"big.csv: line 3: unreadable CSV \(field larger than field limit"):
        load_items(path)


def test_a_non_utf8_byte_names_its_line(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "latin1.csv", disco_rows(3))
    path.write_bytes(path.read_bytes().replace(b"item-2", b"item-\xe9"))
    with pytest.raises(ProbeInputError, match=r"latin1.csv: not valid UTF-8 \(line 4, byte \d+ of the line"):
        load_items(path)


def test_a_wide_csv_reader_leaves_the_process_limit_as_it_was(tmp_path: Path) -> None:
    """GlobalOpinionQA and OpinionQA read fields up to 1 GiB; the limit is restored after, so
    DiSCo's oversized-field refusal does not depend on which bench a process loaded before."""
    from probe.files import wide_csv_fields

    before = csv.field_size_limit()
    with wide_csv_fields():
        assert csv.field_size_limit() == 1 << 30
    assert csv.field_size_limit() == before
    with pytest.raises(RuntimeError), wide_csv_fields():
        raise RuntimeError("a reader that fails")
    assert csv.field_size_limit() == before
