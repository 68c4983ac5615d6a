"""The architecture, enforced: the layering contracts (import-linter), no import cycle (function-
level imports included), no benchmark named outside its own package and the registry, and every
registered task filling every hook."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pyarrow as pa
import pytest

from probe.benches.registry import BUILTIN, tasks
from probe.benches.task import Column, Task

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "probe"
KINDS = ("disco", "ccd", "locqa")


def test_layering_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_import_graph_has_no_cycle() -> None:
    graph = grimp.build_graph("probe", include_external_packages=False)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.append((module, *chain))
    assert cycles == [], cycles[:5]


def _string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):  # attribute docstrings: a string expression statement after a field
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_generic_module_names_a_benchmark() -> None:
    """Only a benchmark's own package and the registry may say "disco", "ccd" or "locqa"."""
    allowed = {PACKAGE / "benches" / k for k in KINDS}
    word = re.compile(r"\b(" + "|".join(KINDS) + r")\b")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(a in path.parents for a in allowed) or path == PACKAGE / "benches" / "registry.py":
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {value!r}"
                  for line, value in _string_constants(ast.parse(path.read_text())) if word.search(value)]
    assert found == []


@pytest.mark.parametrize("task", BUILTIN, ids=lambda t: t.kind)
def test_every_registered_task_fills_every_hook(task: Task) -> None:
    assert task in tasks()
    for f in dataclasses.fields(Task):
        value = getattr(task, f.name)
        assert value is not None, f.name
        if "Callable" in str(f.type):
            assert callable(value), f.name
    assert task.answers in ("letters", "open") and task.title and task.sweep_note
    spec = task.spec_type()
    assert dataclasses.is_dataclass(spec) and spec.kind == task.kind == spec.name
    for columns in (task.sweep_columns, task.pair_columns):
        assert columns and all(isinstance(c, Column) and c.label and c.path for c in columns)
    # the temperature curve re-reads letter log-probs: every letter bench has one, open answers none
    assert bool(task.curve_metrics) == (task.answers == "letters")
    for schema in (task.prompts_schema, task.generations_schema):
        assert isinstance(schema, pa.Schema) and {"prompt_id", "text"} <= set(schema.names)
    assert "n_tokens" in task.prompts_schema.names
