"""The Hydra config tree as the command line sees it: its groups and their entries, the values an
entry composes to, and the typed spec each block is built into. `probe ls`, `probe --help` and
the check of `key=value` overrides read the tree through here, so a key's type, default and
one-line description come from the spec dataclass, the single place they are written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf import OmegaConf

from probe.backends.specs import BACKENDS
from probe.benches.registry import get_task
from probe.config import describe_fields, field_docs, nearest, package_conf_dir
from probe.errors import ProbeInputError
from probe.judges import JudgeSpec
from probe.judges.registry import judge_names, judge_option
from probe.models import ModelSpec
from probe.pipeline.intervention import INTERVENTIONS
from probe.pipeline.run_info import RunInfo
from probe.pipeline.spec import AnalysisSpec, BenchRef, RunConfig, pass_through

GROUPS: dict[str, str] = {"model": "models", "bench": "benches", "backend": "backends", "judge": "judges",
                          "intervention": "interventions"}
"""The groups a user picks an entry of (`bench=locqa`) → their plural, as `probe ls` names them."""


@dataclass(frozen=True)
class Key:
    """One overridable key of a composed block."""

    path: str
    """Dotted, as written on the command line (`bench.limit`)."""
    value: Any
    """The composed value (unresolved: `${…}` interpolations stay as written)."""
    type: str
    """What the typed spec accepts, e.g. `an integer ≥ 1 or null`; empty when no spec knows the key."""
    doc: str


@contextmanager
def _tree() -> Iterator[None]:
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        yield


def groups() -> list[str]:
    """Every config group of the shipped tree (`cluster` included): the folders of `conf/`."""
    return sorted(p.name for p in package_conf_dir().iterdir() if p.is_dir() and not p.name.startswith("_"))


def options(group: str) -> list[str]:
    """The entries of `group` in the shipped tree, sorted."""
    with _tree():
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


@dataclass(frozen=True)
class Composed:
    """A composed config tree, as the command line would run it."""

    values: dict[str, Any]
    """The config without Hydra's own block, unresolved."""
    choices: dict[str, str]
    """The entry chosen in each group (`bench` → `demo`), Hydra's groups left out."""
    help: dict[str, str]
    """`hydra.help`: the `header` and `footer` of `probe --help`."""


def compose_tree(selections: Sequence[str], searchpath: Sequence[str] = ()) -> Composed:
    """The config that `group=entry` `selections` compose to, with `hydra.searchpath=…` overrides
    applied so that entries outside probe are found. An entry that does not exist stops with one
    line naming the nearest that does."""
    try:
        with _tree():
            cfg = compose("config", overrides=[*searchpath, *selections], return_hydra_config=True)
    except MissingConfigException as e:
        group, _, entry = str(e.missing_cfg_file).rpartition("/")
        if group == "judge" and entry in judge_names():  # a bench's own judge: no entry, chosen by name
            raise ProbeInputError(f"judge={entry}: a judge a bench registered has no entry of its own; "
                                  f"select it with {judge_option(entry)} (probe ls judges)") from None
        close = nearest(entry, e.options or [])
        hint = f"did you mean `{group}={close}`? " if close else ""
        raise ProbeInputError(f"{group}={entry}: no such entry of {group}; {hint}entries: {sorted(e.options or [])} "
                              f"(probe ls {GROUPS.get(group, group)})") from None
    except OverrideParseException as e:  # `bench=[`: Hydra's grammar message, in one line
        raise ProbeInputError(f"cannot read the overrides {list(selections)}: {str(e).splitlines()[0]}") from None
    values = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(values, dict)
    hydra = values.pop("hydra")
    choices = {k: str(v) for k, v in hydra["runtime"]["choices"].items() if not k.startswith("hydra/")}
    return Composed(values, choices, {k: str(hydra["help"].get(k) or "") for k in ("header", "footer")})


def spec_of(group: str, block: Mapping[str, Any]) -> type | None:
    """The dataclass a composed top-level block is built into (None: no spec, e.g. a run option)."""
    if group == "model":
        return ModelSpec
    if group == "bench" and "kind" in block:
        return get_task(str(block["kind"]), block.get("module")).data.spec_type
    if group == "backend":
        return BACKENDS.get(str(block.get("name", "hf")))
    if group == "judge":
        return JudgeSpec
    if group == "intervention":
        return INTERVENTIONS.get(str(block.get("name", "none")))
    return AnalysisSpec if group == "analysis" else None


def spec_keys(group: str, block: Mapping[str, Any]) -> dict[str, tuple[str, Any, str]]:
    """Every key the spec of `group` reads → (type description, default, doc). A bench block also
    takes `shard` and `module`, which every bench shares (`BenchRef`)."""
    spec = spec_of(group, block)
    out = {name: (typ, default, doc) for name, typ, default, doc in describe_fields(spec)} if spec else {}
    if group == "bench":
        shared = field_docs(BenchRef)
        out.setdefault("shard", ("i/n or null", None, shared.get("shard", "")))
        out.setdefault("module", ("a string or null", None, "Module to import first: it registers a bench defined "
                                                            "outside probe."))
    return out


def run_options() -> dict[str, tuple[str, Any, str]]:
    """The top-level run options (`progress`, `shard_size`, `dry_run`; the `run:` block's keys as
    `run.label`) → (type, default, doc)."""
    out = {name: (typ, default, doc) for name, typ, default, doc in describe_fields(RunConfig)
           if name in pass_through()}
    return {**out, **{f"run.{name}": (typ, default, doc) for name, typ, default, doc in describe_fields(RunInfo)}}


def block_keys(group: str, block: Mapping[str, Any]) -> tuple[list[Key], list[str]]:
    """The keys of a composed block, typed and described from its spec, and the spec's keys the
    entry does not set (they take the spec's default; `group.key=value` sets them too)."""
    known = spec_keys(group, block)
    keys = []
    for name, value in block.items():
        typ, _, doc = known.get(name, ("", None, ""))
        keys.append(Key(f"{group}.{name}", value, typ, doc))
    return keys, [f"{group}.{name}" for name in known if name not in block and name != "module"]


def describe_entry(group: str, entry: str) -> str:
    """One line about an entry, from the comment at the head of its YAML file: the text after
    ` — ` on its command line, else the first sentence below that line."""
    path = package_conf_dir() / group / f"{entry}.yaml"
    if not path.is_file():
        return ""
    head = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text.startswith(("@package", "Generated from", "Every other key", "(The")):
            continue
        head.append(text)
    if not head:
        return ""
    first, rest = head[0], " ".join(head[1:])
    text = f"{first.split(' — ', 1)[1]} {rest}" if " — " in first else rest
    return re.split(r"(?<=[.!?])\s+(?=[A-Z(`$])", text.strip(), maxsplit=1)[0]
