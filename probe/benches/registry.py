"""The bench registry: a kind name → its `Task`. The only module that lists the built-in benches.

A new benchmark is one module that builds a `Task` and calls `register(task)` when imported,
plus one bench config naming its `kind` (and, when the module is not part of probe, the
`module` to import). Generic code looks tasks up here and never names a kind itself.
"""

from __future__ import annotations

import importlib

from probe.benches.blend.task import TASK as _BLEND
from probe.benches.ccd.task import TASK as _CCD
from probe.benches.disco.task import TASK as _DISCO
from probe.benches.globalopinion.task import TASK as _GLOBALOPINION
from probe.benches.locqa.task import TASK as _LOCQA
from probe.benches.opinionqa.task import TASK as _OPINIONQA
from probe.benches.task import Task
from probe.errors import ProbeInputError
from probe.results.manifest import Manifest

BUILTIN: tuple[Task, ...] = (_DISCO, _CCD, _LOCQA, _BLEND, _GLOBALOPINION, _OPINIONQA)
"""The benches shipped with probe (their configs are generated into `conf/bench/`)."""
_TASKS: dict[str, Task] = {}


def register(task: Task, replace: bool = False) -> Task:
    """Add `task` under `task.kind`, and the tasks of its `modes` under theirs (an error if a
    kind is taken, unless `replace`)."""
    for t in (task, *(m for _, m in task.modes)):
        if not replace and t.kind in _TASKS and _TASKS[t.kind] is not t:
            raise ProbeInputError(f"bench kind {t.kind!r} is already registered")
    for t in (task, *(m for _, m in task.modes)):
        _TASKS[t.kind] = t
    return task


for _task in BUILTIN:
    register(_task)


def get_task(kind: str, module: str | None = None) -> Task:
    """The task registered as `kind`, importing `module` first (a bench defined outside probe
    registers itself on import); an error lists the kinds there are."""
    if module and kind not in _TASKS:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ProbeInputError(f"bench.module: cannot import {module!r} ({e})") from None
    if kind not in _TASKS:
        where = f" (module {module!r} did not register it)" if module else ""
        raise ProbeInputError(f"bench.kind: unknown bench kind {kind!r}{where}; registered: {sorted(_TASKS)}")
    return _TASKS[kind]


def task_of(manifest: Manifest) -> Task:
    """The task a stored run was made with, from its manifest's bench record (importing the
    module that registered a bench defined outside probe)."""
    return get_task(str(manifest.bench.kind), manifest.bench.module)


def tasks() -> tuple[Task, ...]:
    """Every registered task, built-ins first, then in registration order."""
    return tuple(_TASKS.values())
