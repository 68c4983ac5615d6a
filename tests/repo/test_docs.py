"""The documentation's command lines are ones `probe` accepts: every `probe …` and
`python -m probe …` line in a shell block of the README and of `docs/` is parsed as the command
line would parse it and checked without running anything. A run's group entries and keys go
through the command line's own override checker (a misspelt key fails with its one-line error)
and, where the line has no placeholder, its values through the typed run config; the other
subcommands' options are checked against their typed options. A placeholder (`<time>`, `…`,
`${shard_gpu:}`) stands for a value the reader fills in: its key is still checked."""

from __future__ import annotations

import importlib.util
import itertools
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

import probe.__main__ as probe_main
import probe.commands.run  # noqa: F401  (registers the resolvers the config tree uses, `${basename:…}`)
from probe.commands import cmdline, conftree, ls, overrides
from probe.config import build, package_conf_dir
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions
from probe.pipeline.spec import run_config
from probe.report.export import FORMATS as EXPORT_FORMATS

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"bash", "sh", "shell", "console"}
PLACEHOLDER = re.compile(r"<[^>]*>|…|\.\.\.|\$\{")
MAX_COMBINATIONS = 16  # a documented sweep is checked entry by entry up to this many jobs


SUBCOMMANDS = set(probe_main.SUBCOMMANDS)
"""The subcommands `probe` dispatches."""


def _is_module(name: str) -> bool:
    """Whether `python -m NAME` finds a module."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


@dataclass(frozen=True)
class DocCommand:
    """One documented command line."""

    where: str
    """`file:line` of the line in the documentation."""
    line: str
    module: str
    """`probe` for `probe …` and `python -m probe …`; the module of `python -m probe.X …`."""
    argv: tuple[str, ...]
    """What follows the command: the subcommand (if any), then its arguments."""
    pythonpath: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.where}: {self.line}"


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _shell_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) of every shell code block, continuation lines joined."""
    for block in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.M | re.S):
        if block.group(1) not in SHELL:
            continue
        first = text[:block.start(2)].count("\n") + 1
        pending, start = "", first
        for offset, raw in enumerate(block.group(2).splitlines()):
            if not pending:
                start = first + offset
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            yield start, pending + raw
            pending = ""


def _segments(tokens: list[str]) -> Iterator[list[str]]:
    """The simple commands of a shell line (split at `&&`, `||`, `;`, `|`)."""
    current: list[str] = []
    for token in tokens:
        if token in ("&&", "||", ";", "|"):
            yield current
            current = []
        else:
            current.append(token)
    yield current


def _command(where: str, line: str, tokens: list[str]) -> DocCommand | None:
    """The probe command of one simple command, or None when it runs something else."""
    env = {}
    while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tokens[0]):
        key, _, value = tokens.pop(0).partition("=")
        env[key] = value
    pythonpath = tuple(p for p in env.get("PYTHONPATH", "").split(":") if p)
    if tokens[:1] == ["probe"]:
        return DocCommand(where, line, "probe", tuple(tokens[1:]), pythonpath)
    if len(tokens) >= 3 and Path(tokens[0]).name.startswith("python") and tokens[1] == "-m" \
            and tokens[2].split(".")[0] == "probe":
        return DocCommand(where, line, tokens[2], tuple(tokens[3:]), pythonpath)
    return None


def documented_commands() -> list[DocCommand]:
    """Every probe command line in a shell block of the README and the docs pages."""
    out = []
    for path in _doc_files():
        for number, line in _shell_lines(path.read_text()):
            where = f"{path.relative_to(ROOT)}:{number}"
            for tokens in _segments(shlex.split(line, comments=True)):
                command = _command(where, line.strip(), tokens)
                if command is not None:
                    out.append(command)
    return out


def _inline_commands() -> list[tuple[str, str]]:
    """(file, text) of inline code spans that are a probe command line."""
    out = []
    for path in _doc_files():
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
        for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text):
            if re.match(r"(probe|python -m probe)( |\.|$)", span) and not span.startswith("probe."):
                out.append((str(path.relative_to(ROOT)), span))
    return out


# ---- checking one command line -------------------------------------------------------------

def _is_placeholder(token: str) -> bool:
    return bool(PLACEHOLDER.search(token))


def _key_only(argv: list[str]) -> list[str]:
    """`argv` with each placeholder value replaced by a neutral one (its key still checked), a
    group entry that is a placeholder dropped (the default entry stands in), and a bare
    placeholder argument dropped."""
    groups = set(conftree.groups())
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            if not _is_placeholder(arg):
                out.append(arg)
        elif not _is_placeholder(value):
            out.append(arg)
        elif key.lstrip("+~") not in groups:
            out.append(f"{key}=placeholder")
    return out


def _combinations(argv: list[str]) -> list[list[str]]:
    """The override lists of every job a (possibly `-m`) command line runs."""
    overrides = [a for a in argv if not a.startswith("-")]
    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = []
    for o in parsed:
        if o.is_sweep_override():
            prefix = o.input_line.split("=", 1)[0]
            choices.append([f"{prefix}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([o.input_line])
    return [list(c) for c in itertools.product(*choices)]


def check_run(argv: list[str], typed: bool, tmp: Path) -> None:
    """A run's command line: every group entry and key exists (the command line's own check),
    and, when `typed`, every job's composed config builds into a typed `RunConfig`."""
    checked = overrides.check(argv)
    assert checked.first is not None, f"the override grammar rejects {argv}"
    if not typed or "--help" in argv or "-h" in argv:
        return
    jobs = _combinations(checked.argv)
    assert len(jobs) <= MAX_COMBINATIONS, f"{len(jobs)} jobs: document a smaller sweep"
    for job in jobs:
        with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
            cfg = compose("config", overrides=job)
        values = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(values, dict)
        task_overrides = [o for o in job if not o.lstrip("+~").startswith("hydra")]
        run_config(values, tmp, None, task_overrides)


ANALYSIS = {f.name for f in fields(AnalysisOptions)}
COMPARE_KEYS = {"out", "block", "agreement", *(f"analysis.{k}" for k in ("n_boot", "seed", "temperature"))}
BLOCKS = {"expected", "greedy", "debiased", "text", "text_norm"}


def _options(argv: list[str], prefix: str) -> tuple[int, dict[str, object]]:
    """(number of paths, overrides) as the subcommand's own parser reads them."""
    command = cmdline.parse(argv, prefix, flags={"--out": "out", "--format": "format"})
    return len(command.paths), command.overrides


def check_subcommand(name: str, argv: list[str]) -> None:
    """A subcommand's arguments: how many paths, which options, and their typed values."""
    if name == "ls":
        ls.listing(argv)
        return
    if "--help" in argv or "-h" in argv:
        return
    if name == "analyze":
        n, opts = _options(argv, "analysis.")
        assert n == 1, f"analyze takes one run directory, got {n}"
        build(AnalysisOptions, opts, "analysis")
        return
    n, opts = _options(argv, "")
    valid = {"compare": COMPARE_KEYS, "merge": {"out"}, "report": {"out"}, "view": {"out"}, "runs": set(),
             "export": {"format", "out"}}[name]
    unknown = sorted(set(opts) - valid)
    assert not unknown, f"probe {name} has no option(s) {unknown}; valid: {sorted(valid)}"
    if name == "compare":
        assert n == 2, f"compare takes two run directories, got {n}"
        assert opts.get("block", "expected") in BLOCKS, f"block={opts['block']}: expected one of {sorted(BLOCKS)}"
        assert opts.get("agreement", False) in (True, False), f"agreement={opts['agreement']}: expected true or false"
        build(AnalysisOptions, {k.removeprefix("analysis."): v for k, v in opts.items()
                                if k.startswith("analysis.")}, "analysis")
    elif name == "runs":
        assert n <= 1, f"probe runs takes at most one directory, got {n}"
    elif name == "export":
        assert n == 1, f"probe export takes one run directory, got {n}"
        assert opts.get("format", "jsonl") in EXPORT_FORMATS, f"--format {opts['format']}: expected {EXPORT_FORMATS}"
    else:
        assert n >= 1 and (n == 1 or name != "view"), f"probe {name}: {n} paths"
        assert name != "merge" or "out" in opts, "probe merge needs --out DIR"


RUN_IN_THEIR_FOLDER = {"docs/adding-a-benchmark.md"}
"""Pages whose `PYTHONPATH=.` commands run in the folder of the files the page shows, which
`tests/repo/test_docs_examples.py` writes and runs them in."""


def check(command: DocCommand, tmp: Path) -> None:
    """Raise (ProbeInputError or AssertionError) when `command` is not one probe accepts."""
    if command.pythonpath == (".",) and command.where.split(":")[0] in RUN_IN_THEIR_FOLDER:
        return  # run as the page says, from the folder of its files, by tests/repo/test_docs_examples.py
    if command.module != "probe":
        assert _is_module(command.module), f"python -m {command.module}: no such module"
        return
    argv = list(command.argv)
    name = argv[0] if argv and argv[0] in SUBCOMMANDS else "run"
    assert not (argv and re.fullmatch(r"[a-z]+", argv[0]) and argv[0] != name), \
        f"{argv[0]!r} is not a subcommand of probe ({sorted(SUBCOMMANDS)})"
    args = argv[1:] if argv[:1] == [name] else argv
    typed = not any(_is_placeholder(a) for a in args)
    added = [p for p in command.pythonpath if p not in sys.path]
    sys.path[:0] = added
    try:
        if name == "run":
            check_run(_key_only(args), typed, tmp)
        else:
            check_subcommand(name, args if name != "ls" else _key_only(args))
    finally:
        for p in added:
            sys.path.remove(p)


# ---- the tests -----------------------------------------------------------------------------

COMMANDS = documented_commands()


def test_the_docs_hold_commands_of_every_kind() -> None:
    """The extraction finds what the pages show (a parser that finds nothing checks nothing)."""
    assert len(COMMANDS) >= 60
    kinds = {c.argv[0] if c.argv and c.argv[0] in SUBCOMMANDS else "run" for c in COMMANDS}
    assert {"run", "analyze", "compare", "merge", "report", "view", "ls", "runs", "export"} <= kinds


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_every_documented_command_is_valid(command: DocCommand, tmp_path: Path) -> None:
    try:
        check(command, tmp_path)
    except ProbeInputError as e:
        pytest.fail(f"{command}\n  probe: error: {e}")


@pytest.mark.parametrize("where, span", _inline_commands())
def test_inline_commands_name_real_subcommands(where: str, span: str) -> None:
    """Commands quoted in running text (`probe compare A B`) name a subcommand or module that
    exists; their keys are checked where the same command appears in a block."""
    words = span.split()
    if words[0] == "python":
        assert words[2] == "probe" or words[2].startswith("probe.commands."), \
            f"{where}: `{span}`: write `probe SUBCOMMAND`, not `python -m {words[2]}`"
        assert _is_module(words[2]), f"{where}: `{span}`: no module {words[2]}"
    elif len(words) > 1 and re.fullmatch(r"[a-z]+", words[1]):
        assert words[1] in SUBCOMMANDS, f"{where}: `{span}`: {words[1]!r} is not a subcommand of probe"


@pytest.mark.parametrize("line", [
    "probe run bench=demo bench.limt=2",                  # a misspelt key
    "probe run model=gemma-3-12b bench=disco backend.batch_token=4096",
    "probe run bench=demo analysis.temprature=0.7 dry_run=true",
    "probe run bench=locqaa judge=rules",                 # a misspelt entry
    "probe run -m model=tiny,tiny-gemma3 bench=demo bench.condition=[C0]",
    "probe run bench=demo analysis.n_boot=-5",            # a value out of range
    "probe run bench=demo backend.mode=letter",           # a value not among the choices
    "probe analyze runs/x analysis.temprature=0.5",
    "probe compare runs/a runs/b blok=greedy",
    "probe ls bench=demo backend=vlm",
    "probe anlyze runs/x",                                # a misspelt subcommand
    "probe export runs/x --format xlsx",                  # a format it does not write
    "probe runs runs/a runs/b",                           # one directory at most
])
def test_a_misspelt_command_fails(line: str, tmp_path: Path) -> None:
    """The check is not vacuous: the same command lines with one mistake are refused."""
    command = _command("test", line, shlex.split(line))
    assert command is not None
    with pytest.raises((ProbeInputError, AssertionError)):
        check(command, tmp_path)


def test_no_command_line_cites_a_module_that_moved() -> None:
    """Subcommands are `probe NAME`, not `python -m probe.NAME`."""
    old = [c for c in COMMANDS if c.module != "probe" and not c.module.startswith("probe.commands.")]
    assert not old, [str(c) for c in old]


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_command_tables_list_every_subcommand(page: str) -> None:
    """The first table whose header is `| command |` names every subcommand `probe` dispatches."""
    text = (ROOT / page).read_text()
    table = text[text.index("| command |"):].split("\n\n")[0]
    listed = {m.group(1) for m in re.finditer(r"^\| `probe (\w+)", table, re.M)}
    assert listed >= SUBCOMMANDS, f"{page}: the command table lacks {sorted(SUBCOMMANDS - listed)}"
    assert "`probe --version`" in table


def test_the_configs_page_lists_every_bench_entry() -> None:
    """The `bench/` row of the config-tree table names every entry of `conf/bench`."""
    row = next(line for line in (ROOT / "docs/running/configs.md").read_text().splitlines()
               if line.startswith("| `bench/` |"))
    entries = {p.stem for p in (package_conf_dir() / "bench").glob("*.yaml")}
    named = set(re.findall(r"`(\w+)`", row.split("|")[2]))
    assert entries <= named, f"configs page, bench row lacks {sorted(entries - named)}"
