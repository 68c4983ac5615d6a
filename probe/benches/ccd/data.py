"""CCD-Bench: 10 options per dilemma, one per GLOBE cluster; letters A–J (docs/benchmarks/ccd.md).

The published `CCD-Bench.json` is read from a local path or downloaded once from its source
URL into the cache; its sha256 is checked against `bench.sha256` when given and recorded in
the manifest. Designs: `cyclic` (all 10 rotations, exact and position-balanced) or
`latin_square` (one ordering per item from a per-domain Williams square, as in the paper).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from probe.benches.ccd.judging import GLOBE_DIMENSIONS
from probe.benches.ccd.designs import latin_square_orders
from probe.benches.orders import DEFAULT_CAP, OrderCap
from probe.benches.spec_header import DownloadedBench
from probe.benches.sources import MAX_DOWNLOAD_BYTES, fetch
from probe.config import Ge, Seed
from probe.errors import ProbeInputError
from probe.files import utf8_error
from probe.prompts.text_forms import TEXT_FORMAT_LINE
from probe.prompts.variants import Wording
from probe.types import LETTERS, Item, Option, Prompt

CLUSTERS: tuple[str, ...] = (
    "anglo", "eastern_europe", "latin-america", "latin_europe", "confucian_asia",
    "nordic_europe", "sub-saharan_africa", "southern-asia", "germanic_europe", "middle_east",
)
DOMAINS: tuple[str, ...] = ("Arts", "Education", "Family", "Wellness", "Work", "Scientific", "Lifestyle")
K = len(CLUSTERS)
SOURCE_URL = "https://raw.githubusercontent.com/smartlab-nyu/CCD-Bench/main/datasets/CCD-Bench.json"
LETTER_LIST = ", ".join(LETTERS[:K])
FORMAT_LINE = f'Return ONLY valid JSON in exactly this format: {{"answer_choice":"X"}} (where X is one of {LETTER_LIST}).'
RATIONALE_LINES = (
    # The paper invited models to reason with GLOBE's nine dimensions; its pluralism rate (share of
    # rationales citing ≥ 2) is only comparable when the prompt names them.
    "In your rationale you may invoke any of GLOBE's nine cultural dimensions: "
    + ", ".join(GLOBE_DIMENSIONS) + ".\n"
    "Answer in exactly this format:\n"
    "SELECTED OPTION: <one letter from A to J>\n"
    "RATIONALE: <one or two sentences>"
)
RATIONALE_CUE = "SELECTED OPTION:"


@dataclass(frozen=True)
class CCDSpec(DownloadedBench):
    """The `bench:` config block of CCD-Bench: 10 options per dilemma, one per GLOBE cluster, letters A–J."""

    name: str = "ccd"
    kind: str = "ccd"
    path: str | None = None
    """A local CCD-Bench.json; null downloads `url` once into the cache."""
    url: str = SOURCE_URL
    design: Literal["cyclic", "latin_square"] = "cyclic"
    """cyclic: all 10 rotations per item (exact); latin_square: the paper's one ordering per item."""
    seed: Seed = 42
    """Latin square relabelling seed (the paper's 42)."""
    limit: Annotated[int, Ge(1)] | None = None
    """Score only the first N items (smoke tests); null = all."""
    text_form: Literal["hybrid", "cloze"] = "hybrid"
    """Answer-text reading (backend.mode=text|letters+text): hybrid (options listed, the answer's text asked) | cloze (the question alone)."""
    orders: Literal["rotations", "permutations", "williams", "reverse", "latin_square"] = "rotations"
    """Option orderings (docs/concepts/orders.md): rotations (10, = design cyclic) | permutations (10! — sample with orders_sample) | williams (10) | reverse (2) | latin_square (= design latin_square)."""
    orders_cap: OrderCap = DEFAULT_CAP
    """Most orderings per item a design may present; more is refused unless `permutations` samples."""
    orders_sample: OrderCap | None = None
    """Under `permutations` above the cap: draw this many orderings without replacement (null: refuse)."""
    orders_seed: Seed = 0
    """Seed of the `orders_sample` draw (recorded in the manifest)."""


def resolve_source(spec: CCDSpec, cache_dir: Path) -> Path:
    """The JSON to read: `spec.path`, or the cached download of `spec.url` (fetched once, parsed
    before it is cached)."""
    return fetch(spec.path, spec.url, spec.sha256, cache_dir / "ccd", load_items,
                 spec.max_download_bytes)


def load_items(path: Path) -> list[Item]:
    """Read and validate CCD-Bench.json; errors name the file, the item index and the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{path}: invalid or truncated JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except RecursionError:  # `[[[[…` thousands deep: the parser's recursion limit, not a traceback
        raise ProbeInputError(f"{path}: JSON nested too deeply to read; expected a JSON array of items") from None
    if not isinstance(data, list) or not data:
        raise ProbeInputError(f"{path}: expected a non-empty JSON array of items, got {type(data).__name__}")
    return [_item(obj, f"{path}: item {i}", i) for i, obj in enumerate(data)]


def _item(obj: Any, where: str, index: int) -> Item:
    if not isinstance(obj, dict):
        raise ProbeInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    question = obj.get("Question")
    if not isinstance(question, str) or not question.strip():
        raise ProbeInputError(f"{where}, field 'Question': expected a non-empty string, got {question!r}")
    domain = obj.get("Domain")
    if domain not in DOMAINS:
        raise ProbeInputError(f"{where}, field 'Domain': expected one of {list(DOMAINS)}, got {domain!r}")
    options, seen = [], {}
    for cluster in CLUSTERS:
        if cluster not in obj:
            raise ProbeInputError(f"{where}, field {cluster!r}: missing cluster option (keys: {sorted(obj)})")
        text = obj[cluster]
        if not isinstance(text, str) or not text.strip():
            raise ProbeInputError(f"{where}, field {cluster!r}: expected a non-empty string, got {text!r}")
        key = " ".join(text.split()).casefold()
        if key in seen:
            raise ProbeInputError(f"{where}, field {cluster!r}: same option text as {seen[key]!r}")
        seen[key] = cluster
        options.append(Option(key=cluster, text=text.strip(), group=cluster))
    extra = tuple((k, json.dumps(v)) for k, v in obj.items() if k not in CLUSTERS and k not in ("Question", "Domain"))
    return Item(item_id=f"ccd-{index:04d}", question=question.strip(), options=tuple(options),
                category=domain, extra=extra)


def design_name(spec: CCDSpec) -> str:
    """The ordering design `spec` asks for: `bench.design` is read as `bench.orders` (`cyclic` is
    `rotations`, `latin_square` is `latin_square`); the two may not name different designs."""
    if spec.design == "latin_square" and spec.orders not in ("rotations", "latin_square"):
        raise ProbeInputError(f"bench.design=latin_square and bench.orders={spec.orders} name two designs; "
                              "bench.design is read as bench.orders: set only bench.orders")
    return "latin_square" if spec.design == "latin_square" else spec.orders


def condition_label(spec: CCDSpec) -> str:
    """The `condition` column: the design's name, `cyclic` for the default rotations (as stored before
    `bench.orders`)."""
    name = design_name(spec)
    return spec.design if name == "rotations" else name


def build_prompts(items: Sequence[Item], spec: CCDSpec, generate: bool = False,
                  orders: Sequence[tuple[int, ...]] | None = None) -> list[Prompt]:
    """One prompt per (item, ordering): 10 rotations (cyclic), one Latin-square row, or the
    orderings of `bench.orders` (`orders`, from `probe.benches.orders`).

    `rotation` is the cyclic shift k (option (i + k) mod 10 at letter i), the square's row, or the
    ordering's index in its design.
    """
    if design_name(spec) == "latin_square":
        orders = latin_square_orders([i.category or "" for i in items], K, spec.seed)
        per_domain: dict[str, int] = {}
        cells = []
        for item, order in zip(items, orders):
            row = per_domain.get(item.category or "", 0)
            per_domain[item.category or ""] = row + 1
            cells.append([(row % K, tuple(order))])
    elif orders is not None:
        cells = [list(enumerate(orders)) for _ in items]
    else:
        cells = [[(k, tuple((i + k) % K for i in range(K))) for k in range(K)] for _ in items]
    prompts: list[Prompt] = []
    for item, item_cells in zip(items, cells):
        for rotation, order in item_cells:
            prompts.append(Prompt(
                prompt_id=len(prompts), item_id=item.item_id, order=order,
                groups=tuple(item.options[o].group for o in order),
                message=render_message(item, order, generate), prefix_key=item.item_id, category=item.category,
                design=(("condition", condition_label(spec)), ("rotation", rotation)),
            ))
    return prompts


def render_message(item: Item, order: Sequence[int], generate: bool, wording: Wording = Wording()) -> str:
    """The dilemma, options A–J, then the JSON format line (or, when generating, the
    SELECTED OPTION / RATIONALE format whose rationales feed the pluralism metric). `wording` (a
    prompt factor's variant) changes the labels — at the options and in the format line's list —,
    the option lines, or puts its instruction line in the format line's place."""
    labels = wording.labels or LETTERS[:K]
    lines = [f"Question: {item.question}", "Options:"]
    lines += [wording.option_line(labels[i], item.options[o].text, f"{labels[i]}. {item.options[o].text}")
              for i, o in enumerate(order)]
    if generate:
        lines.append(RATIONALE_LINES)
    elif wording.instruction is not None:
        lines.append(wording.instruction)
    else:
        # the format line names the labels the prompt shows
        lines.append(FORMAT_LINE if wording.labels is None else FORMAT_LINE.replace(LETTER_LIST, ", ".join(labels)))
    return "\n".join(lines)


def reword(item: Item, prompt: Prompt, wording: Wording) -> str:
    """A letter prompt's message under another wording (`probe.prompts.variants.Reword`)."""
    return render_message(item, prompt.order, False, wording)


def text_message(item: Item, prompt: Prompt, form: str) -> str:
    """The text reading's message of a design cell: hybrid, the options under the cell's order
    and the text format line; cloze, the dilemma alone (`probe.prompts.text_forms`)."""
    if form == "cloze":
        return f"Question: {item.question}"
    lines = [f"Question: {item.question}", "Options:"]
    lines += [f"{LETTERS[i]}. {item.options[o].text}" for i, o in enumerate(prompt.order)]
    lines.append(TEXT_FORMAT_LINE)
    return "\n".join(lines)
