"""`probe ls` and `probe --help`: what there is to run and every key it takes, described.

    probe ls                      # every group: its entries, one line each
    probe ls benches              # one group (models, benches, backends, judges, interventions)
    probe ls bench=locqa          # that entry's keys: type, default, one-line description
    probe bench=locqa --help      # the same for every block of that selection, and the run options

Descriptions come from the typed spec dataclasses (the attribute docstring below each field)
and, for the entries themselves, from the comment at the head of each `conf/` file.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from probe.config import nearest
from probe.commands.conftree import GROUPS, Composed, block_keys, compose_tree, describe_entry, groups, options, run_options
from probe.benches.registry import get_task, tasks
from probe.errors import ProbeInputError, printable
from probe.viz.markdown import TERMINAL_WIDTH
from probe.judges.registry import MECHANISMS, judge_about, judge_names, judge_option

USAGE = __doc__.split("\n\n")[1]
PLURAL = {plural: group for group, plural in GROUPS.items()}
KEY_COLUMN = 34


def main(argv: Sequence[str]) -> int:
    """`probe ls [GROUP ...] [group=entry ...]` → 0; a name that is neither stops with one line, 2."""
    if "-h" in argv or "--help" in argv:
        print(f"probe ls: list what probe can run.\n\n{USAGE}")
        return 0
    try:
        print(listing(argv))
    except ProbeInputError as e:
        print(f"probe: error: {printable(str(e))}", file=sys.stderr)
        return 2
    return 0


def listing(argv: Sequence[str]) -> str:
    """The text `probe ls argv` prints."""
    searchpath = [a for a in argv if a.startswith("hydra.searchpath=")]
    selections = [a for a in argv if "=" in a and a not in searchpath]
    names = [a for a in argv if "=" not in a]
    for name in names:
        if name not in PLURAL and name not in GROUPS:
            close = nearest(name, [*PLURAL, *GROUPS])
            hint = f"did you mean `{close}`? " if close else ""
            raise ProbeInputError(f"ls {name}: no such group; {hint}groups: {', '.join(PLURAL)}")
    for sel in selections:
        group = sel.partition("=")[0]
        if group not in GROUPS:
            close = nearest(group, list(GROUPS))
            hint = f"did you mean `{close}=…`? " if close else ""
            raise ProbeInputError(f"ls {sel}: {group!r} is not a group; {hint}groups: {', '.join(GROUPS)}")
    parts = [entries(PLURAL.get(n, n)) for n in names]
    if selections:
        composed = compose_tree(selections, searchpath)
        parts += [keys_of(group, composed) for group in dict.fromkeys(s.partition("=")[0] for s in selections)]
    if not argv:
        parts = [entries(group) for group in GROUPS]
        parts.append("The keys of one entry: probe ls GROUP=NAME (e.g. bench=demo, backend=vllm).\n"
                     "Every key of a run, with the run options: probe [group=entry …] --help")
    return "\n\n".join(parts)


def entries(group: str) -> str:
    """A group's entries, one line each: name, then (models) kind and checkpoint, then what it is;
    for judges also the judges benches registered and each bench's judges, its default first."""
    lines = [f"{GROUPS[group]} ({group}=NAME)"]
    for entry in options(group):
        facts = _model_facts(entry) if group == "model" else ""
        lines.append(wrapped(f"  {entry:<20} {facts}", describe_entry(group, entry)))
    if group == "judge":
        lines += _bench_judges(options(group))
    return "\n".join(lines)


def _bench_judges(entries: Sequence[str]) -> list[str]:
    """The judges benches registered without an entry (`judge.name=NAME`), then each judged bench's
    judges as the options that select them, its default first."""
    own = [n for n in judge_names() if n not in entries and n not in MECHANISMS]
    lines = ["Judges benches registered, without an entry (judge.name=NAME):"] if own else []
    lines += [f"  {n:<20} {judge_about(n)}".rstrip() for n in own]
    judged = [t for t in tasks() if t.judging.judges]
    if judged:
        lines += ["Each judged bench's judges (the first is its default, used when no judge option is given):"]
        lines += [f"  {f'bench={t.kind}':<20} {', '.join(judge_option(n) for n in t.judging.judges)}"
                  for t in judged]
    return lines


def _model_facts(entry: str) -> str:
    block = compose_tree([f"model={entry}"]).values["model"]
    where = block.get("hub_id") or f"source: {block.get('source')}"
    return f"{block.get('kind', ''):<9} {where:<38} "


def keys_of(group: str, composed: Composed) -> str:
    """The keys of the entry `composed` chose in `group`, one line each, and the spec's other keys."""
    entry = composed.choices.get(group, "")
    about = describe_entry(group, entry)
    keys, unset = block_keys(group, composed.values.get(group) or {})
    lines = [wrapped(f"{group}={entry} — ", about) if about else f"{group}={entry}"]
    lines += [_key_line(k.path, k.value, k.type, k.doc) for k in keys]
    if unset:
        lines.append(wrapped("  also read, at the spec's default unless set: ", ", ".join(unset)))
    if group == "judge":
        lines += _default_judge(composed)
    return "\n".join(lines)


def _default_judge(composed: Composed) -> list[str]:
    """The judge the selected bench uses when no judge option is given, where the tree's default
    entry is not it."""
    bench = composed.values.get("bench") or {}
    if "kind" not in bench:
        return []
    default = get_task(str(bench["kind"]), bench.get("module")).for_mode(bench.get("mode")).judging.default
    if default is None or default == (composed.values.get("judge") or {}).get("name"):
        return []
    return [f"  without a judge option, bench={composed.choices.get('bench', bench['kind'])} judges with its "
            f"default: {judge_option(default)}"]


def _key_line(path: str, value: Any, typ: str, doc: str) -> str:
    shown = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=1 << 16)
    shown = shown.strip().removesuffix("...").strip()
    about = " ".join(p for p in (f"{typ}." if typ else "", doc) if p)
    return wrapped(f"  {f'{path}={shown}':<{KEY_COLUMN}} ", about)


def wrapped(lead: str, text: str, width: int = TERMINAL_WIDTH) -> str:
    """`lead` then `text` wrapped to `width` characters, its later lines indented to the text's
    column; a lead too wide to leave the text 40 columns puts the text on the lines under it."""
    if not text:
        return lead.rstrip()
    indent = len(lead) if len(lead) <= width - 40 else 6
    lines = textwrap.wrap(text, width - indent, break_long_words=False, break_on_hyphens=False)
    if indent != len(lead):
        return "\n".join([lead.rstrip(), *(" " * indent + line for line in lines)])
    return "\n".join([lead + lines[0], *(" " * indent + line for line in lines[1:])])


def help_text(composed: Composed) -> str:
    """`probe [overrides] --help`: usage, the groups and their entries, then every key of the
    selected entries and the run options, each with its type, value and description."""
    lines = [composed.help["header"].rstrip(), "", "Groups (group=entry; one line per entry: probe ls GROUP):"]
    lines += [wrapped(f"  {g}: ", ", ".join(options(g))) for g in groups()]
    chosen = " ".join(f"{g}={composed.choices[g]}" for g in GROUPS if g in composed.choices)
    lines += ["", f"Keys of this selection ({chosen}):"]
    blocks = [keys_of(g, composed) for g in GROUPS if g in composed.values]
    analysis, _ = block_keys("analysis", composed.values.get("analysis") or {})
    blocks.append("analysis (every run)\n" + "\n".join(_key_line(k.path, k.value, k.type, k.doc) for k in analysis))
    blocks.append("run options\n" + "\n".join(_run_option_lines(composed.values)))
    return "\n".join(lines) + "\n" + "\n\n".join(blocks) + "\n\n" + composed.help["footer"].rstrip()


def _run_option_lines(values: Mapping[str, Any]) -> list[str]:
    return [_key_line(name, _value_at(values, name, default), typ, doc)
            for name, (typ, default, doc) in run_options().items()]


def _value_at(values: Mapping[str, Any], dotted: str, default: Any) -> Any:
    """The composed value at a dotted key (`run.label`), `default` where it is not set."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return values.get(head, default)
    block = values.get(head)
    return block.get(rest, default) if isinstance(block, Mapping) else default
