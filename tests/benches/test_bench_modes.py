"""`Task.modes`: one bench config whose `bench.mode` picks a task of another kind (open answers
in one mode, scored texts in another), resolved where the run's bench is built and recorded so a
stored run finds the same task again."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import pytest

from probe.benches import registry
from probe.benches.registry import get_task, register, task_of
from probe.benches.task import Task
from probe.errors import ProbeInputError
from probe.pipeline.spec import bench_ref


@dataclass(frozen=True)
class ModalSpec:
    """A bench block with a mode."""

    name: str = "modal"
    kind: str = "modal"
    mode: str = "plain"


def _tasks() -> tuple[Task, Task]:
    base = registry.BUILTIN[0]
    data = replace(base.data, spec_type=ModalSpec)
    scored = replace(base, kind="modal_scored", title="Modal (scored)", data=data)
    return replace(base, kind="modal", title="Modal", data=data, modes=(("scored", scored),)), scored


@pytest.fixture()
def modal(monkeypatch: pytest.MonkeyPatch) -> tuple[Task, Task]:
    monkeypatch.setattr(registry, "_TASKS", dict(registry._TASKS))  # registrations stay in this test
    plain, scored = _tasks()
    register(plain)
    return plain, scored


def test_registering_a_task_registers_its_modes(modal: tuple[Task, Task]) -> None:
    plain, scored = modal
    assert get_task("modal") is plain and get_task("modal_scored") is scored
    assert registry.tasks()[-2:] == (plain, scored)


def test_the_mode_picks_the_task_and_the_record_keeps_its_kind(modal: tuple[Task, Task]) -> None:
    plain, scored = modal
    ref = bench_ref({"kind": "modal", "mode": "scored"})
    assert ref.task is scored and ref.spec == ModalSpec(kind="modal_scored", mode="scored")
    record: dict[str, Any] = ref.record()
    assert record == {"name": "modal", "kind": "modal_scored", "mode": "scored"}
    stored = SimpleNamespace(bench=SimpleNamespace(kind=record["kind"], module=None, config=record))
    assert task_of(stored) is scored  # type: ignore[arg-type]  # only the bench record is read
    assert bench_ref(record).task is scored  # a recorded block builds the same run again


def test_a_mode_without_a_task_of_its_own_keeps_the_kind(modal: tuple[Task, Task]) -> None:
    plain, _ = modal
    ref = bench_ref({"kind": "modal", "mode": "plain"})
    assert ref.task is plain and ref.record()["kind"] == "modal"
    assert bench_ref({"kind": "modal"}).task is plain


def test_a_mode_task_whose_kind_is_taken_is_refused(modal: tuple[Task, Task]) -> None:
    _, scored = modal
    other = replace(registry.BUILTIN[1], kind="modal_other", modes=(("scored", replace(scored, title="another")),))
    with pytest.raises(ProbeInputError, match="bench kind 'modal_scored' is already registered"):
        register(other)
    assert "modal_other" not in registry._TASKS  # nothing of a refused task is registered
