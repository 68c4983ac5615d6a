"""DiSCo: 4 culturally grounded options, 12 cultures, context conditions C0–C3 (docs/benchmarks/disco.md).

Loading validates every row where it enters; the design expands each item into 52 prompts:
C0 ×4 option rotations, C1 and C2 ×4 targets ×4 rotations, C3 ×4 rotations ×4 context rotations.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import huggingface_hub

from probe.benches.orders import DEFAULT_CAP, OrderCap, OrderName, Seed
from probe.benches.spec_header import BenchHeader
from probe.config import Ge, NonEmpty
from probe.errors import ProbeInputError
from probe.files import utf8_error
from probe.prompts.text_forms import TEXT_FORMAT_LINE
from probe.prompts.variants import Wording
from probe.types import LETTERS, Item, Option, Prompt

K = 4
DEFAULT_CULTURES: tuple[str, ...] = (
    "Algeria", "Assam", "China", "Ethiopia", "Greece", "Indonesia",
    "Northern_Nigeria", "South_Korea", "Spain", "UK", "US", "West_Java",
)
HUB_REPO = "DiSCo2026/DiSCo_Dataset_and_Benchmark"
HUB_FILE = "DiSCo Bench.csv"

DEFAULT_INSTRUCTIONS = (
    "Without any explanation, choose only one from the given alphabet choices "
    '(e.g., A, B, C). Provide as JSON format: {"answer_choice":""}'
)
FORMAT_LINE = (
    'Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} '
    "(where X is one of A, B, C, D)."
)
HYBRID_INSTRUCTIONS = (
    "Without any explanation, choose only one of the given options. "
    'Provide the text of your chosen option as JSON format: {"answer":""}'
)
"""The hybrid text reading's instruction line, in place of the letter one (which asks for a
letter and `answer_choice`, and would contradict the text format line)."""
CONDITIONS: tuple[Literal["C0", "C1", "C2", "C3"], ...] = ("C0", "C1", "C2", "C3")
HIGH_RESOURCE: tuple[str, ...] = ("UK", "US", "South_Korea", "China")
LOW_RESOURCE: tuple[str, ...] = ("Ethiopia", "Northern_Nigeria", "Assam")

REQUIRED_COLUMNS: tuple[str, ...] = (
    "QID", "ID", "Question", "Options", "Metadata", "User_Info", "User_Instruction",
    "Context_L1", "Context_L2", "Context_L3", "Context_L4",
)
_KNOWN_COLUMNS = set(REQUIRED_COLUMNS) | {"Instructions", "Category"}


@dataclass(frozen=True)
class DiscoDesign:
    """Which conditions to present (the full protocol is all four), under which option orderings."""

    conditions: tuple[str, ...] = CONDITIONS
    orders: tuple[tuple[int, ...], ...] = tuple(tuple((i + k) % K for i in range(K)) for k in range(K))
    """The orderings of each item (`probe.benches.orders`; default the 4 cyclic rotations)."""


@dataclass(frozen=True)
class DiscoSpec(BenchHeader):
    """The `bench:` config block of a DiSCo-format bench: 4 culturally grounded options, 12 cultures,
    context conditions C0–C3."""

    name: str = "disco"
    kind: str = "disco"
    path: str | None = None
    """A local CSV; when null, `packaged` or else the hub dataset is used."""
    packaged: str | None = None
    """A CSV shipped in `probe/data/` (the demo bench)."""
    hub_repo: str = HUB_REPO
    """Hub dataset holding the CSV."""
    hub_file: str = HUB_FILE
    """The CSV's file name in the hub dataset."""
    revision: str | None = None
    """Dataset revision (commit, tag or branch) to pin."""
    cultures: Annotated[tuple[str, ...], NonEmpty()] = DEFAULT_CULTURES
    """Valid culture labels; any other label in `Metadata` is an input error."""
    conditions: Annotated[tuple[Literal["C0", "C1", "C2", "C3"], ...], NonEmpty()] = CONDITIONS
    """The full protocol is all four; a subset scores fewer prompts."""
    high_resource: Annotated[tuple[str, ...], NonEmpty()] = HIGH_RESOURCE
    """The high-resource group of SPD (mean CSD of these minus the low-resource group's)."""
    low_resource: Annotated[tuple[str, ...], NonEmpty()] = LOW_RESOURCE
    """The low-resource group of SPD."""
    limit: Annotated[int, Ge(1)] | None = None
    """Score only the first N items (smoke tests); null = all."""
    text_form: Literal["hybrid", "cloze"] = "hybrid"
    """Answer-text reading (backend.mode=text|letters+text): hybrid (options listed, the answer's text asked) | cloze (the question alone)."""
    orders: OrderName = "rotations"
    """Option orderings per item and condition (docs/concepts/orders.md): rotations (4) | permutations (24) | williams (4) | reverse (2)."""
    orders_cap: OrderCap = DEFAULT_CAP
    """Most orderings per item a design may present; more is refused unless `permutations` samples."""
    orders_sample: OrderCap | None = None
    """Under `permutations` above the cap: draw this many orderings without replacement (null: refuse)."""
    orders_seed: Seed = 0
    """Seed of the `orders_sample` draw (recorded in the manifest)."""


def resolve_source(spec: DiscoSpec) -> Path:
    """The CSV to read: a local path, a file shipped with probe, or the hub dataset (cached)."""
    if spec.path:
        path = Path(spec.path).expanduser()
        if not path.is_file():
            raise ProbeInputError(f"bench.path: {path} does not exist or is not a file")
        return path
    if spec.packaged:
        path = Path(__file__).resolve().parents[2] / "data" / spec.packaged
        if not path.is_file():
            raise ProbeInputError(f"bench.packaged: {spec.packaged!r} is not shipped in probe/data")
        return path
    return Path(huggingface_hub.hf_hub_download(spec.hub_repo, spec.hub_file, repo_type="dataset", revision=spec.revision))


def load_items(path: Path, cultures: Sequence[str] = DEFAULT_CULTURES) -> list[Item]:
    """Read and validate a DiSCo CSV.

    Every problem stops the run with a `ProbeInputError` naming the file, the row (its `ID`
    when readable, else the line) and the field. Unknown extra columns are kept on the item.
    """
    try:
        return _read_items(path, set(cultures))
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None


def _read_items(path: Path, cultures: set[str]) -> list[Item]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        if not header:
            raise ProbeInputError(f"{path}: empty file, expected a header row with {REQUIRED_COLUMNS}")
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            raise ProbeInputError(f"{path}: line 1 (header): column(s) {repeated} appear more than once; each column "
                                  "must be named once (a repeated name would silently shadow the first)")
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ProbeInputError(f"{path}: missing column(s) {missing}; found columns {header}")
        items: list[Item] = []
        seen: dict[str, int] = {}
        for row in _rows(reader, path):
            where = f"{path}: line {reader.line_num}"
            item = _parse_row(row, where, cultures)
            if item.item_id in seen:
                raise ProbeInputError(
                    f"{where} (ID {item.item_id!r}), field 'ID': duplicate ID, first seen at line {seen[item.item_id]}"
                )
            seen[item.item_id] = reader.line_num
            items.append(item)
    if not items:
        raise ProbeInputError(f"{path}: no data rows after the header")
    return items


def _rows(reader: csv.DictReader, path: Path) -> Iterator[dict[str, str | None]]:
    """The reader's rows; a CSV-level error (an oversized field, a stray quote) names its line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise ProbeInputError(f"{path}: line {reader.line_num + 1}: unreadable CSV ({e})") from None
        yield row


def _parse_row(row: dict[str, str | None], where: str, cultures: set[str]) -> Item:
    if None in row:  # csv puts surplus cells of a ragged row under the key None
        raise ProbeInputError(f"{where}: more cells than header columns ({len(row) - 1} columns expected)")
    item_id = (row["ID"] or "").strip()
    if not item_id:
        raise ProbeInputError(f"{where}, field 'ID': empty")
    where = f"{where} (ID {item_id!r})"
    for name in ("Question", "User_Instruction"):
        if not (row[name] or "").strip():
            raise ProbeInputError(f"{where}, field {name!r}: empty")
    texts = _letter_object(row["Options"], where, "Options")
    groups = _letter_object(row["Metadata"], where, "Metadata")
    if set(groups) != set(texts):
        raise ProbeInputError(
            f"{where}, field 'Metadata': keys {sorted(groups)} do not match the Options keys {sorted(texts)}"
        )
    for letter, culture in groups.items():
        if culture not in cultures:
            label = "empty culture label" if not culture else f"unknown culture {culture!r}"
            raise ProbeInputError(
                f"{where}, field 'Metadata' key {letter!r}: {label}; expected one of {sorted(cultures)}"
            )
    if len(set(groups.values())) != K:
        raise ProbeInputError(f"{where}, field 'Metadata': expected 4 distinct cultures, got {groups}")
    options = []
    for i, letter in enumerate(LETTERS[:K]):
        fact = (row[f"Context_L{i + 1}"] or "").strip()
        if not fact:
            raise ProbeInputError(f"{where}, field 'Context_L{i + 1}': empty (C3 needs one fact per option)")
        options.append(Option(key=letter, text=texts[letter], group=groups[letter], context=fact))
    instructions = (row.get("Instructions") or "").strip() or None
    extra = tuple((k, v or "") for k, v in row.items() if k not in _KNOWN_COLUMNS and k is not None)
    return Item(
        item_id=item_id,
        question=row["Question"].strip(),
        options=tuple(options),
        instructions=instructions,
        user_instruction=row["User_Instruction"].strip(),
        category=(row.get("Category") or "").strip() or None,
        extra=(("QID", row["QID"] or ""),) + extra,
    )


def _letter_object(cell: str | None, where: str, field: str) -> dict[str, str]:
    try:
        value = json.loads(cell or "", object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{where}, field {field!r}: invalid JSON ({e.msg} at char {e.pos}): {cell!r}") from None
    except ValueError as e:  # a key repeated inside the object
        raise ProbeInputError(f"{where}, field {field!r}: {e}") from None
    except RecursionError:  # `[[[[…` thousands deep: the parser's recursion limit, not a traceback
        raise ProbeInputError(f"{where}, field {field!r}: JSON nested too deeply; expected a flat object A-D") from None
    if not isinstance(value, dict):
        raise ProbeInputError(f"{where}, field {field!r}: expected a JSON object A-D, got {type(value).__name__}")
    if len(value) != K:
        raise ProbeInputError(f"{where}, field {field!r}: expected 4 options (A-D), got {len(value)}: {sorted(value)}")
    if sorted(value) != list(LETTERS[:K]):
        raise ProbeInputError(f"{where}, field {field!r}: expected keys A, B, C, D, got {sorted(value)}")
    out = {}
    for k, v in value.items():
        if not isinstance(v, str):
            raise ProbeInputError(f"{where}, field {field!r} key {k!r}: expected a string, got {v!r}")
        out[k] = v.strip()
        if field == "Options" and not out[k]:
            raise ProbeInputError(f"{where}, field 'Options' key {k!r}: empty option text")
    if field == "Options":
        _distinct_options(out, where)
    return out


def _distinct_options(texts: dict[str, str], where: str) -> None:
    """Two options of one item with the same text (up to case and spacing) are refused: the
    model cannot tell them apart, and the text reading would count their mass twice."""
    seen: dict[str, str] = {}
    for letter, text in texts.items():
        key = " ".join(text.split()).casefold()
        if key in seen:
            raise ProbeInputError(f"{where}, field 'Options' key {letter!r}: same option text as key {seen[key]!r} "
                                  f"({text!r}); every option of an item must differ")
        seen[key] = letter


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    dups = sorted({k for k in keys if keys.count(k) > 1})
    if dups:
        raise ValueError(f"duplicate key(s) {dups}")
    return dict(pairs)


def build_prompts(items: Sequence[Item], design: DiscoDesign = DiscoDesign()) -> list[Prompt]:
    """Expand items into the DiSCo protocol, in a fixed order (item, condition, target, k, j).

    Ordering k shows original option `design.orders[k][i]` at letter i (by default rotation k:
    option (i + k) mod 4). In C3 with context rotation j, context slot s shows the fact of the
    option displayed at letter (s + j) mod 4, so j = 0 aligns facts with letters and the slot-1
    fact always belongs to letter j — under any ordering, so C3 composes with every design.
    """
    for c in design.conditions:
        if c not in CONDITIONS:
            raise ProbeInputError(f"bench.conditions: unknown condition {c!r}; expected some of {CONDITIONS}")
    prompts: list[Prompt] = []
    for item in items:
        for condition in design.conditions:
            for target, k, j in _cells(item, condition, len(design.orders)):
                order = design.orders[k]
                prompts.append(Prompt(
                    prompt_id=len(prompts),
                    item_id=item.item_id,
                    order=order,
                    groups=tuple(item.options[o].group for o in order),
                    message=render_message(item, condition, target, order, j),
                    prefix_key=f"{item.item_id}|{condition}|{target}",
                    category=item.category,
                    design=(("condition", condition), ("target", target), ("rotation", k), ("ctx_rotation", j)),
                ))
    return prompts


def _cells(item: Item, condition: str, n_orders: int) -> list[tuple[str | None, int, int | None]]:
    if condition == "C0":
        return [(None, k, None) for k in range(n_orders)]
    if condition in ("C1", "C2"):
        return [(o.group, k, None) for o in item.options for k in range(n_orders)]
    return [(None, k, j) for k in range(n_orders) for j in range(K)]


def render_message(
    item: Item, condition: str, target: str | None, order: tuple[int, ...], ctx_rotation: int | None,
    form: str = "letters", wording: Wording = Wording(),
) -> str:
    """The user-turn text of one DiSCo prompt (the line order of docs/benchmarks/disco.md; absent parts omitted); `form`
    `hybrid` asks for the answer's text instead of its letter, `cloze` ends before the
    instruction line (no options to choose from). `wording` (a prompt factor's variant) changes
    the labels — in the option lines, the default instruction's example and the format line —,
    the instruction line or the option lines."""
    lines = [f"Question: {item.question}"]
    if condition in ("C1", "C2"):
        assert target is not None
        # The label verbatim (`West_Java`), as the paper's own prompts show it.
        lines.append(f"User info: The user is located in {target}.")
    if condition == "C2":
        lines.append(f"User instruction: {item.user_instruction}")
    if condition == "C3":
        assert ctx_rotation is not None
        lines.append("Context:")
        for s in range(K):
            fact = item.options[order[(s + ctx_rotation) % K]].context
            lines.append(f"{s + 1}. {fact}")
    if form == "cloze":
        return "\n".join(lines)
    instructions = HYBRID_INSTRUCTIONS if form == "hybrid" else item.instructions or DEFAULT_INSTRUCTIONS
    labels = wording.labels or LETTERS[:K]
    if wording.labels is not None and instructions == DEFAULT_INSTRUCTIONS:
        instructions = instructions.replace("(e.g., A, B, C)", f"(e.g., {', '.join(labels[:3])})")
    lines.append(f"Instructions: {wording.instruction or instructions}")
    lines.append("Options:")
    lines.extend(wording.option_line(labels[i], item.options[o].text, f"{labels[i]}. {item.options[o].text}")
                 for i, o in enumerate(order))
    format_line = FORMAT_LINE if wording.labels is None else FORMAT_LINE.replace("A, B, C, D", ", ".join(labels))
    lines.append(TEXT_FORMAT_LINE if form == "hybrid" else format_line)
    return "\n".join(lines)


def reword(item: Item, prompt: Prompt, wording: Wording) -> str:
    """A letter prompt's message under another wording (`probe.prompts.variants.Reword`)."""
    condition, target, ctx = (prompt.value(k) for k in ("condition", "target", "ctx_rotation"))
    return render_message(item, str(condition), None if target is None else str(target), prompt.order,
                          None if ctx is None else int(ctx), wording=wording)


def text_message(item: Item, prompt: Prompt, form: str) -> str:
    """The text reading's message of a design cell (`probe.prompts.text_forms`)."""
    condition, target, ctx = (prompt.value(k) for k in ("condition", "target", "ctx_rotation"))
    return render_message(item, str(condition), None if target is None else str(target), prompt.order,
                          None if ctx is None else int(ctx), form)
