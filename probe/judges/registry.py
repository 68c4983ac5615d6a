"""The judge registry: judge tasks and deterministic judges, filled by the benches that own them.

A bench that asks a judge registers, when its module is imported, each `JudgeTask` it asks
(the prompt an LLM judge sees, the validator every judge's output must pass, the verdict
columns it fills) and any deterministic judge of its own (a judge name → a factory). Generic
code — the LLM and HTTP judges, the verdict cache, `make_judge` — looks them up here and never
names a task or a bench's judge itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from probe.config import package_conf_dir
from probe.errors import ProbeInputError
from probe.judges.base import Judge


@dataclass(frozen=True)
class JudgeTask:
    """One kind of question a judge answers."""

    name: str
    """The `task` of its requests and of its `judgements.parquet` rows."""
    prompt: Callable[[Mapping[str, Any]], str]
    """`payload → the text an LLM judge is asked`."""
    validate: Callable[[Any, Mapping[str, Any]], dict[str, Any]]
    """`(parsed JSON, payload) → the cleaned verdict`, or ValueError saying what is wrong."""
    columns: tuple[pa.Field, ...]
    """The `judgements.parquet` columns its verdicts fill (besides the `dropped` flags)."""


_TASKS: dict[str, JudgeTask] = {}
_JUDGES: dict[str, Callable[[], Judge]] = {}

MECHANISMS: tuple[str, ...] = ("http", "llm")
"""Judges that answer any registered task (a model reads `JudgeTask.prompt`); no bench may
register a judge under these names."""


def register_task(task: JudgeTask) -> JudgeTask:
    """Add a judge task (an error when another task has its name)."""
    if _TASKS.get(task.name, task) is not task:
        raise ProbeInputError(f"judge task {task.name!r} is already registered")
    _TASKS[task.name] = task
    return task


def register_judge(name: str, factory: Callable[[], Judge]) -> None:
    """Add a deterministic judge selectable as `judge=<name>` (an error when the name is taken)."""
    if name in MECHANISMS or _JUDGES.get(name, factory) is not factory:
        raise ProbeInputError(f"judge {name!r} is already registered")
    _JUDGES[name] = factory


def judge_task(name: str) -> JudgeTask:
    """The registered task `name`; an error lists the registered ones."""
    if name not in _TASKS:
        raise ProbeInputError(f"judge task {name!r} is not registered; registered: {sorted(_TASKS)}")
    return _TASKS[name]


def has_task(name: str) -> bool:
    """Whether a bench registered the judge task `name`."""
    return name in _TASKS


def deterministic_judge(name: str) -> Judge | None:
    """A new instance of the registered judge `name`, or None when none is registered."""
    factory = _JUDGES.get(name)
    return None if factory is None else factory()


def judge_about(name: str) -> str:
    """The first line of the docstring of the registered judge `name` (empty when it has none)."""
    doc = getattr(_JUDGES.get(name), "__doc__", None) or ""
    return doc.strip().split("\n")[0]


def judge_names() -> tuple[str, ...]:
    """Every judge `judge.name` can select: the mechanisms and the registered judges."""
    return tuple(sorted((*MECHANISMS, *_JUDGES)))


def judge_option(name: str) -> str:
    """The command-line option that selects the judge `name`: `judge=<name>` where the config tree
    has an entry of that name (`conf/judge/<name>.yaml`), else `judge.name=<name>` (a judge a
    bench registered, which has no entry of its own)."""
    return f"judge={name}" if (package_conf_dir() / "judge" / f"{name}.yaml").is_file() else f"judge.name={name}"


def judge_choices(judges: Sequence[str]) -> str:
    """A bench's judges (its default first) as the options that select them, for messages and
    listings: `judge.name=x (the default: no judge option), judge=llm, judge=http`."""
    spelled = [judge_option(name) for name in judges]
    if spelled:
        spelled[0] += " (the default: no judge option)"
    return ", ".join(spelled)
