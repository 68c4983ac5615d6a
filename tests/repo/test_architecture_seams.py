"""The architecture's seams, enforced: typed without `Any`, one home for the exposure-normalised
share, a judged plugin that states only its own parts, run-directory names and manifest records
read only through `probe.results`, and a stored run that holds no callback into benches."""

from __future__ import annotations

import ast
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping

from test_architecture import PACKAGE, ROOT, _string_constants

from probe.benches.registry import tasks

def _namespace(module: types.ModuleType) -> dict[str, object]:
    """The module's globals plus its `if TYPE_CHECKING:` imports, to resolve its annotations."""
    ns = dict(vars(module))
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            exec(compile(ast.Module(node.body, type_ignores=[]), str(module.__file__), "exec"), ns)
    return ns


def _lookup(name: str, ns: dict[str, object]) -> object:
    """`name` in `ns`, else in the probe module that defines it (a recursive alias names itself)."""
    try:
        return eval(name, ns)  # noqa: S307 - annotation text of our own modules
    except NameError:
        owners = [vars(m)[name] for n, m in sorted(sys.modules.items()) if n.startswith("probe") and name in vars(m)]
        assert owners, f"cannot resolve {name!r}"
        return owners[0]


def _any_in(annotation: object, ns: dict[str, object], seen: frozenset[str] = frozenset()) -> bool:
    """Whether `typing.Any` occurs anywhere in an annotation: its text, its arguments, the type
    aliases it names (followed once each, so recursive ones end)."""
    if annotation is typing.Any:
        return True
    if isinstance(annotation, (str, typing.ForwardRef)):
        name = annotation if isinstance(annotation, str) else annotation.__forward_arg__
        return name not in seen and _any_in(_lookup(name, ns), ns, seen | {name})
    if isinstance(annotation, (list, tuple)):
        return any(_any_in(a, ns, seen) for a in annotation)
    return any(_any_in(a, ns, seen) for a in typing.get_args(annotation))


def _signature_annotations(fn: Callable[..., object]) -> list[object]:
    """The annotations of a function's parameters and return, and of each of its overloads."""
    out: list[object] = []
    for f in (fn, *typing.get_overloads(fn)):
        sig = inspect.signature(f)
        out += [p.annotation for p in sig.parameters.values() if p.annotation is not inspect.Parameter.empty]
        if sig.return_annotation is not inspect.Signature.empty:
            out.append(sig.return_annotation)
    return out


def _protocol_annotations(cls: type) -> list[object]:
    """A Protocol's attribute annotations and its methods' signatures (inherited ones included)."""
    out: list[object] = []
    for klass in cls.__mro__:
        if klass is object or not getattr(klass, "_is_protocol", False) or klass is typing.Protocol:
            continue
        out += list(vars(klass).get("__annotations__", {}).values())
        out += [a for name, f in vars(klass).items() if inspect.isfunction(f) and not name.startswith("_")
                or name == "__call__" for a in _signature_annotations(f)]
    return out


def _seams() -> dict[str, tuple[list[object], dict[str, object]]]:
    """`name → (annotations, the namespace they resolve in)` of every seam the rule covers."""
    import probe.backends.base as base
    import probe.backends.factory as factory
    import probe.benches.task as task_module
    import probe.prompts.tokenizer as tokenizer

    protocols = [c for c in vars(base).values() if isinstance(c, type) and c.__module__ == base.__name__
                 and getattr(c, "_is_protocol", False)]
    assert {"LetterBackend", "TextBackend", "Scorer", "Generator", "Patcher"} <= {c.__name__ for c in protocols}
    seams = {"make_backend": (_signature_annotations(factory.make_backend), _namespace(factory)),
             "Backend": ([base.Backend], _namespace(base)),
             "Tokenizer": (_protocol_annotations(tokenizer.Tokenizer), _namespace(tokenizer)),
             "Scoring.metrics": ([task_module.Scoring.__annotations__["metrics"]], _namespace(task_module)),
             "Scoring.headline": ([task_module.Scoring.__annotations__["headline"]], _namespace(task_module))}
    seams.update({c.__name__: (_protocol_annotations(c), _namespace(base)) for c in protocols})
    for t in tasks():  # each registered task's own metrics hook
        seams[f"{t.kind}.metrics"] = (_signature_annotations(t.scoring.metrics),
                                      _namespace(sys.modules[t.scoring.metrics.__module__]))
    return seams


def test_seams_are_typed_without_any() -> None:
    """`make_backend`, the backend and tokenizer Protocols and the tasks' metrics hooks say what
    they take and give: no `Any` in their signatures, nor in the aliases those name."""
    seams = _seams()
    assert all(annotations for annotations, _ in seams.values()), [k for k, (a, _) in seams.items() if not a]
    assert [name for name, (annotations, ns) in seams.items() if _any_in(annotations, ns)] == []


def test_the_any_check_sees_any_inside_aliases_and_callables() -> None:
    ns = {"typing": typing, "Any": typing.Any, "Mapping": Mapping, "Callable": Callable,
          "Loose": dict[str, typing.Any], "Tree": dict[str, "Node"], "Node": typing.Union[int, list["Node"]]}
    assert _any_in("Callable[[int], Mapping[str, Any]]", ns) and _any_in("Loose | None", ns)
    assert _any_in(["int", "Callable[..., Any]"], ns)
    assert not _any_in("Callable[[int], Tree]", ns) and not _any_in("Mapping[str, int] | None", ns)


# --- one CSD: the exposure-normalised share is computed in one function ---------------------

CSD_HOME = PACKAGE / "probs.py"


def _root(node: ast.AST) -> str | None:
    """The variable an expression reads from (`rate` of `rate[name]`, `rate.values()`, `rate.sum`)."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_rate(value: ast.AST, target: str | None) -> bool:
    """An expression holding a quotient of other quantities: a `/`, or `ratio(…)` (NaN-safe
    division); rescaling a variable by itself (`a = a / a.sum()`) makes no rate."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and _root(n.left) != target
               or isinstance(n, ast.Call) and _root(n.func) == "ratio" and n.args and _root(n.args[0]) != target
               for n in ast.walk(value))


def _sums_over(node: ast.AST, rates: set[str]) -> bool:
    """`rate.sum()`, `np.nansum(rate, …)`, `sum(rate.values())`, `np.sum(np.where(…, rate, 0))`:
    a sum over a name holding rates."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("sum", "nansum"):
        return False
    receiver = _root(func.value) if isinstance(func, ast.Attribute) else None
    return receiver in rates or any(isinstance(n, ast.Name) and n.id in rates for a in node.args for n in ast.walk(a))


def _csd_computations(source: str) -> list[int]:
    """Lines that divide quotients (exposure rates) by their own sum — `rate / rate.sum()`,
    `ratio(rate, np.nansum(rate))`, `r / total` after `total = sum(rate.values())`: the
    exposure-normalised share written out by hand."""
    tree = ast.parse(source)
    assigns = [(t, n.value) for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]
    rates = {_root(t) for t, v in assigns if _is_rate(v, _root(t))} - {None}
    totals = {_root(t) for t, v in assigns if _sums_over(v, rates)} - {None}

    def normaliser(node: ast.AST) -> bool:
        return _sums_over(node, rates) or isinstance(node, ast.Name) and node.id in totals

    found = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
             and normaliser(n.right)]
    found += [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and _root(n.func) == "ratio"
              and len(n.args) == 2 and normaliser(n.args[1])]
    return sorted(found)


def test_the_exposure_normalised_share_has_one_home() -> None:
    """`probe.probs.exposure_shares` is the one CSD: no other module normalises exposure rates by
    their sum (the text agreement, the logit lens, `Run.group_distribution` and DiSCo's metrics
    call it)."""
    assert _csd_computations(CSD_HOME.read_text())  # the check sees the function itself
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(PACKAGE.rglob("*.py")) if path != CSD_HOME
             for line in _csd_computations(path.read_text())]
    assert found == []


def test_the_csd_check_sees_each_way_it_was_written() -> None:
    assert _csd_computations("rate = ratio(sel, shown)\nout = ratio(rate, np.nansum(rate, axis=-1, keepdims=True))\n")
    assert _csd_computations("rate = {}\nrate[n] = ratio(a, b)[..., k]\n"
                             "csd = rate[n] / np.nansum(rate[n], axis=-1, keepdims=True)\n")
    assert _csd_computations("rate = sel / np.where(app > 0, app, 1.0)\nreturn rate / rate.sum()\n")
    assert _csd_computations("rate = {c: sel[c] / app[c] for c in names}\ntotal = sum(rate.values())\n"
                             "out = {c: r / total for c, r in rate.items()}\n")
    assert not _csd_computations("e = np.exp(z)\np = e / e.sum(axis=-1, keepdims=True)\n")  # softmax


# --- the judged plugin is built by open_answer_task -----------------------------------------

JUDGED_PLUGIN = ROOT / "tests" / "plugins" / "judgedtoy.py"
JUDGED_PLUGIN_LINES_BEFORE = 144
"""`tests/plugins/judgedtoy.py` before `open_answer_task`, when it filled `Task`, `Tables`,
`Judging` and its schemas by hand."""


def test_the_judged_plugin_states_only_its_own_parts() -> None:
    """The judged test plugin builds its task with `open_answer_task` (no `Task`, `Tables` or
    `Judging` of its own, no schema by hand) and is shorter than it was without the builder."""
    tree = ast.parse(JUDGED_PLUGIN.read_text())
    called = {_root(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "open_answer_task" in called and "OpenAnswer" in called
    assert not called & {"Task", "Tables", "Judging", "judgements_schema", "schema"}, called
    assert len(JUDGED_PLUGIN.read_text().splitlines()) < JUDGED_PLUGIN_LINES_BEFORE


# --- results/ is the only way into a run directory ---------------------------------------

RESULTS = PACKAGE / "results"


def _layout_names() -> set[str]:
    """Every file and folder name `probe.results.layout` defines (its upper-case string
    constants and the strings of its tuples)."""
    from probe.results import layout

    names = set()
    for name, value in vars(layout).items():
        if name.isupper():
            names |= {value} if isinstance(value, str) else {v for v in value if isinstance(v, str)}
    return names


def _layout_literals(source: str, names: set[str]) -> list[tuple[int, str]]:
    """`(line, name)` of each string literal (docstrings aside) that is a run-directory name."""
    return [(line, value) for line, value in _string_constants(ast.parse(source)) if value in names]


def test_run_directory_names_appear_only_in_results() -> None:
    """`probe.results.layout` names every file of a run directory; every other module uses its
    names, so a file is renamed or added in one place and no reader spells it differently."""
    names = _layout_names()
    assert {"manifest.json", "prompts.parquet", "metrics.json", "DONE", "scores.parts"} <= names
    found = [f"{path.relative_to(ROOT)}:{line}: {value!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if RESULTS not in path.parents for line, value in _layout_literals(path.read_text(), names)]
    assert found == []


MANIFEST_RECORDS = ("intervention", "analysis", "judge", "tokenizer", "gguf")
"""The manifest's nested records, typed in `probe.results.records` (and the model's `gguf` block)."""
RAW_READS = ("get", "pop", "setdefault", "items", "keys", "values")


def _record_key_reads(source: str) -> list[tuple[int, str]]:
    """`(line, read)` of each raw read of a manifest record: a keyed read or a mapping method on
    a record (`manifest.intervention.get("name")`, `(run.manifest.analysis or {}).items()`), or
    on a name bound to one in the same function (`iv = e.intervention or {}; iv["culture"]`).
    Reads of the manifest itself by key are `_manifest_key_reads`'."""
    def is_record(node: ast.expr, bound: set[str]) -> bool:
        if isinstance(node, ast.BoolOp):  # `x.analysis or {}`
            return any(is_record(v, bound) for v in node.values)
        return (isinstance(node, ast.Attribute) and node.attr in MANIFEST_RECORDS) or \
            (isinstance(node, ast.Name) and node.id in bound)

    found = []
    tree = ast.parse(source)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        bound = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign) and is_record(n.value, set())
                 for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(scope):
            if isinstance(node, ast.Subscript) and is_record(node.value, bound):
                found.append((node.lineno, ast.unparse(node)))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_READS \
                    and is_record(node.func.value, bound):
                found.append((node.lineno, ast.unparse(node)))
            elif isinstance(node, ast.Dict) and any(k is None and is_record(v, bound)  # `{**x.analysis}`
                                                    for k, v in zip(node.keys, node.values)):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(set(found))


def test_manifest_records_are_read_only_through_their_types() -> None:
    """The manifest's nested records (`intervention`, `analysis`, `judge`, …) are typed in
    `probe.results.records`; no other module reads them by raw keys."""
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in sorted(PACKAGE.rglob("*.py"))
             if RESULTS not in path.parents for line, what in _record_key_reads(path.read_text())]
    assert found == []


def test_the_record_key_check_sees_raw_reads() -> None:
    source = ('def f(e, manifest, raw):\n'
              '    iv = e.intervention or {}\n'
              '    a = iv["culture"]\n'
              '    b = manifest.intervention.get("name")\n'
              '    c = (e.manifest.analysis or {}).items()\n'
              '    d = (e.model.gguf or {}).get("file"), {**(manifest.analysis or {}), "n_boot": 0}\n'
              '    ok = e.intervention.culture, manifest.analysis.temperature, metrics.get("model")\n'
              '    steer = e.intervention.steer\n'
              '    fine = steer.items(), asdict(cfg.judge).items()\n')
    assert sorted({line for line, _ in _record_key_reads(source)}) == [3, 4, 5, 6]


def test_a_stored_run_holds_no_callback_into_benches() -> None:
    """`Run` (the results layer) holds data only: no field is a callable a bench sets (its
    debiased reading lives in `probe.analyses.view.StoredRun`, a layer above, which knows the task)."""
    from dataclasses import fields

    from probe.results.run import Run

    assert [f.name for f in fields(Run) if "Callable" in str(f.type)] == []
