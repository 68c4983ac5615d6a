"""The architecture, enforced: the layering contracts (import-linter), no import cycle (function-
level imports included), no benchmark named outside its own package and the registry, and every
registered task filling every hook."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pyarrow as pa
import pytest

from probe.benches.registry import BUILTIN, tasks
from probe.benches import task as task_module
from probe.benches.task import Column, Task
from probe.types import Prompt

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "probe"
KINDS = tuple(t.kind for t in BUILTIN)  # each built-in bench's package is named by its kind


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


def _bench_words() -> re.Pattern[str]:
    """Every registered bench's name and display name, and the short forms its reports use, in
    any case, as a word."""
    words = {w for t in BUILTIN for w in (t.kind, t.title)} | {"DiSCo", "CCD", "LocQA", "BLEnD", "GlobalOpinion"}
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    return re.compile(r"(?<![A-Za-z0-9_])(" + alternatives + r")(?![A-Za-z0-9])", re.I)


def test_no_generic_module_names_a_benchmark() -> None:
    """Only a benchmark's own package and the registry may name it (its registry name or display
    name, any case) in a string that is not a docstring; the shared `probe/benches/*.py` builders
    are generic code too."""
    word = _bench_words()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if (rel[0] == "benches" and len(rel) > 2) or path == PACKAGE / "benches" / "registry.py":
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {value[:80]!r}"
                  for line, value in _string_constants(ast.parse(path.read_text())) if word.search(value)]
    assert found == []


def test_the_forbidden_import_contract_lists_every_builtin_bench() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    through = next(c for c in contracts if c["name"].startswith("the pipeline, reports and command lines"))
    assert set(through["forbidden_modules"]) == {f"probe.benches.{t.kind}" for t in BUILTIN}
    assert set(through["source_modules"]) >= {"probe.pipeline", "probe.report", "probe.commands"}


def test_the_bench_name_check_sees_every_spelling() -> None:
    word = _bench_words()
    assert all(word.search(t) for t in ("at DiSCo's C3", "(LocQA: templates)", "ccd-bench", "GLOBALOPINIONQA", "blend"))
    assert not any(word.search(t) for t in ("discount", "blended", "occd"))


DESIGN_WORD = re.compile(r"\b(C[0-3]|ctx_rotation)\b|[Cc]ulture")
"""A bench's design vocabulary (DiSCo's conditions and context rotation, its word for its groups)
that generic code must get from the task (`Design`, `Presentation.groups`), never name itself."""

STORED_NAMES = {("probe/results/records.py", "culture"), ("probe/results/patch_tables.py", "cultures"),
                ("probe/commands/overrides.py", "intervention.culture")}
"""The only literals allowed the word: the results contract's keys as first stored (the steered
group in the intervention record, the groups of `patching.json`) and the renamed config key's
old name, read with a notice."""


def _identifiers(tree: ast.AST) -> list[tuple[int, str]]:
    """`(line, name)` of every name the code binds or reads: variables, attributes, arguments,
    keyword arguments, functions, classes and imported names."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.arg):
            out.append((node.lineno, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            out.append((node.value.lineno, node.arg))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.lineno, node.name))
        elif isinstance(node, ast.alias):
            out.append((node.lineno, node.asname or node.name))
    return out


def _design_words(source: str) -> list[tuple[int, str]]:
    """`(line, text)` of each identifier or (non-docstring) string literal naming a design word."""
    tree = ast.parse(source)
    return sorted((line, text) for line, text in [*_identifiers(tree), *_string_constants(tree)]
                  if DESIGN_WORD.search(text))


def test_no_generic_module_names_a_bench_design_field() -> None:
    """Outside `probe/benches/`, no identifier or string literal says `C0`–`C3`, `ctx_rotation` or
    `culture`: conditions, targets, rotations and the contrasts interventions compare come from the
    task's `Design` (`probe.types.Design`), the word for its groups from `Presentation.groups`, so a
    bench with another design edits no generic module (the stored keys of `STORED_NAMES` aside)."""
    benches = PACKAGE / "benches"
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if benches not in path.parents for line, text in _design_words(path.read_text())
             if (str(path.relative_to(ROOT)), text) not in STORED_NAMES]
    assert found == []


def test_the_design_word_check_sees_names_and_literals() -> None:
    source = ('"""C0 in a docstring is prose."""\nx = table.ctx_rotation\ny = f(source="C1")\n'
              'def g(ctx_rotation=None): return "C3_aligned"\nz = "C10"\nfor culture in a: print(f"top {b} culture")\n'
              'w = "cultural preference", spec.cultures\n')
    assert _design_words(source) == [(2, "ctx_rotation"), (3, "C1"), (4, "ctx_rotation"), (6, " culture"),
                                     (6, "culture"), (7, "cultures")]  # "cultural" is not the word


def test_a_prompt_has_no_bench_design_field() -> None:
    """`Prompt` holds what every bench has; a bench's design fields live in `Prompt.design`."""
    names = {f.name for f in dataclasses.fields(Prompt)}
    assert names & {"condition", "target", "rotation", "ctx_rotation"} == set()
    assert "design" in names


OPTIONAL = {"text", "factors", "debiased", "reword"}
"""The capabilities and hooks a bench may lack (None: it has none)."""


def test_a_task_is_a_few_capabilities_with_no_failing_stand_ins() -> None:
    """`Task` stays a handful of capability records: a new ability is a new capability type, and a
    missing one is None, never a default that fails only when called."""
    records = [task_module.Task, task_module.Data, task_module.Scoring, task_module.Presentation,
               task_module.Tables, task_module.Judging, task_module.TextForms, task_module.Factors]
    assert len(dataclasses.fields(task_module.Task)) <= 12
    for record in records:
        for f in dataclasses.fields(record):
            if callable(f.default) and not isinstance(f.default, type):
                source = inspect.getsource(f.default) if inspect.isfunction(f.default) else ""
                assert "raise" not in source, f"{record.__name__}.{f.name}"
    assert {f.name for f in dataclasses.fields(task_module.Task) if f.default is None} == {"text", "factors"}


@pytest.mark.parametrize("task", BUILTIN, ids=lambda t: t.kind)
def test_every_registered_task_fills_every_hook(task: Task) -> None:
    assert task in tasks()
    capabilities = (task, task.data, task.scoring, task.presentation, task.tables, task.judging, task.text, task.factors)
    for record in (c for c in capabilities if c is not None):  # the capabilities a bench has, and their hooks
        for f in dataclasses.fields(record):
            value = getattr(record, f.name)
            assert value is not None or f.name in OPTIONAL, f.name
            if "Callable" in str(f.type):
                assert callable(value), f.name
    assert task.answers in ("letters", "open") and task.title and task.presentation.sweep_note
    spec = task.data.spec_type()
    assert dataclasses.is_dataclass(spec) and spec.kind == task.kind == spec.name
    for columns in (task.presentation.sweep_columns, task.presentation.pair_columns):
        assert columns and all(isinstance(c, Column) and c.label and c.path for c in columns)
    # each path resolved in the bench's real metrics: tests/benches/test_task_hooks.py
    # the temperature curve re-reads letter log-probs: every letter bench has one, open answers none
    assert bool(task.presentation.curve_metrics) == (task.answers == "letters")
    for schema in (task.tables.prompts_schema, task.tables.generations_schema):
        assert isinstance(schema, pa.Schema) and {"prompt_id", "text"} <= set(schema.names)
    assert "n_tokens" in task.tables.prompts_schema.names
    # the parts its design names are columns of its prompts table (a letter bench's conditions at least)
    roles = [task.design.condition, task.design.target, task.design.ordering]
    assert {r for r in roles if r is not None} <= set(task.tables.prompts_schema.names)
    assert (task.design.condition is not None) == (task.answers == "letters")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """`(line, imported module, imported names)` of every import in the file, function-level
    ones included (`import a.b` imports no names)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module, tuple(a.name for a in node.names)))
    return out


def _owner(module: str) -> str | None:
    """The built-in bench whose package holds `module` (None: a generic module)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["probe", "benches"] and parts[2] in KINDS else None


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


KNOWN_BENCH_IMPORTS: dict[str, str] = {}
"""Known exceptions (none: the scoring benchmark's prompt mixes live in DiSCo's package)."""


def test_no_module_outside_a_bench_imports_its_package() -> None:
    """A bench's modules and constants are imported only inside its own package; the registry
    imports each built-in `TASK` and nothing else of it."""
    found = []
    for module, path in _sources().items():
        for line, imported, names in _imports(path):
            owner = _owner(imported) or next((k for k in KINDS if imported == f"probe.benches.{k}"), None)
            if owner is None or _owner(module) == owner or KNOWN_BENCH_IMPORTS.get(module) == owner:
                continue
            if module == "probe.benches.registry" and imported == f"probe.benches.{owner}.task" and names == ("TASK",):
                continue
            found.append(f"{path.relative_to(ROOT)}:{line}: imports {imported} {list(names)}")
    assert found == []


def test_no_generic_module_defines_a_constant_only_one_bench_uses() -> None:
    """A constant (an upper-case module-level name) that a generic module defines and only one
    bench's package imports is that bench's vocabulary (GLOBE's dimensions, LocQA's table
    schemas): it belongs in that bench's package, so a new bench never edits generic code."""
    users: dict[tuple[str, str], set[str]] = {}
    for module, path in _sources().items():
        for _, imported, names in _imports(path):
            if imported.startswith("probe.") and _owner(imported) is None:
                for name in names:
                    if name.isupper() and module != imported:
                        users.setdefault((imported, name), set()).add(_owner(module) or "generic")
    found = [f"{imported}.{name} is used only by {sorted(who)[0]}" for (imported, name), who in sorted(users.items())
             if len(who) == 1 and who != {"generic"}]
    assert found == []


def test_no_generic_module_names_a_bench_judge_task() -> None:
    """Judge tasks are registered by the bench that asks them; generic code (the judges'
    mechanism, the pipeline, results) never names one, as a string or otherwise."""
    from probe.judges import registry

    owned = {name: _owner(task.prompt.__module__) for name, task in registry._TASKS.items()}
    assert {k for k in owned.values()} >= {"ccd", "locqa", "blend"} and None not in owned.values(), owned
    found = []
    for module, path in _sources().items():
        if _owner(module) is None:
            found += [f"{path.relative_to(ROOT)}:{line}: {value!r}"
                      for line, value in _string_constants(ast.parse(path.read_text())) if value in owned]
    assert found == []


PUBLISHED_JUDGEMENTS = ["prompt_id", "task", "template", "language", "dimensions", "mentioned_answers",
                        "framing_style", "matches", "match_locale", "mentions_us_answer", "judge_error", "judge",
                        "dropped"]
"""The `judgements.parquet` columns of CCD and LocQA runs (docs/results/contract.md)."""
OWN_JUDGEMENTS = {"blend": ["prompt_id", "task", "question_id", "country", "language", "template", "correct",
                            "matched_answers", "judge_error", "judge", "dropped"]}
"""Benches added since keep a layout of their own columns (`judgements_schema(<columns>)`)."""


@pytest.mark.parametrize("task", [t for t in BUILTIN if t.judging.judges], ids=lambda t: t.kind)
def test_a_judged_bench_declares_its_judge_tasks_columns(task: Task) -> None:
    """Its judgements layout holds every verdict column of the judge tasks its package
    registered, with the same type; the built-in ones keep the published layout."""
    from probe.judges import registry

    mine = [t for t in registry._TASKS.values() if _owner(t.prompt.__module__) == task.kind]
    assert mine
    schema = task.judging.schema
    for judge_task in mine:
        for column in judge_task.columns:
            assert schema.field(column.name).type == column.type, (judge_task.name, column.name)
    assert schema.names == OWN_JUDGEMENTS.get(task.kind, PUBLISHED_JUDGEMENTS)


MANIFEST_READER = PACKAGE / "results" / "manifest.py"


def _is_manifest(node: ast.expr) -> bool:
    """A name or attribute that holds a run's manifest (`manifest`, `run.manifest`, `shard_manifest`)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "manifest" in name.lower()


def _manifest_key_reads(source: str) -> list[tuple[int, str]]:
    """`(line, key)` of each string-keyed read of a manifest (`manifest["bench"]`,
    `run.manifest.get("analysis")`, `manifest.setdefault(…)`, `manifest.pop(…)`), and of each
    `manifest.json` parsed by hand (`json.loads(… "manifest.json" …)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_manifest(node.value) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            found.append((node.lineno, node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = node.args[0] if node.args else None
            if node.func.attr in ("get", "setdefault", "pop") and _is_manifest(node.func.value) \
                    and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
            if node.func.attr == "loads" and any(isinstance(c, ast.Constant) and c.value == "manifest.json"
                                                 for a in node.args for c in ast.walk(a)):
                found.append((node.lineno, "manifest.json"))
    return sorted(found)


def test_manifest_is_read_only_through_its_typed_record() -> None:
    """`probe.results.manifest` is the one module that reads `manifest.json` and its keys; every
    other module reads the typed attributes (`manifest.bench.kind`), so a renamed or moved field
    is one edit and a missing one is None, not a KeyError somewhere downstream."""
    found = [f"{path.relative_to(ROOT)}:{line}: {key!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != MANIFEST_READER for line, key in _manifest_key_reads(path.read_text())]
    assert found == []


def test_the_manifest_key_check_sees_string_keyed_reads() -> None:
    reads = _manifest_key_reads('m = run.manifest["bench"]["kind"]\nx = manifest.get("analysis") or {}\n'
                                'other_manifest.setdefault("timings", {})\n'
                                'y = json.loads((p / "manifest.json").read_text())\nz = run.manifest.bench.kind\n'
                                'w = metrics.get("model")\n')
    assert reads == [(1, "bench"), (2, "analysis"), (3, "timings"), (4, "manifest.json")]


def test_generic_code_names_no_verdict_column_of_a_bench() -> None:
    """A bench's verdict columns (`JudgeTask.columns`) are its own: generic code — results,
    schemas, reports — never names one; each bench declares its `judgements.parquet` columns."""
    from probe.judges import registry

    columns = {c.name for t in registry._TASKS.values() if _owner(t.prompt.__module__) is not None
               for c in t.columns}
    assert {"dimensions", "matches", "correct"} <= columns
    found = []
    for module, path in _sources().items():
        if _owner(module) is None:
            found += [f"{path.relative_to(ROOT)}:{line}: {value!r}"
                      for line, value in _string_constants(ast.parse(path.read_text())) if value in columns]
    assert found == []


# --- typed seams: no `Any` in the signatures that connect the layers -------------------------
