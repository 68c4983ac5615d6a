"""Golden comparison: every run kind on the tiny model, each stored file fingerprinted, two
fingerprint sets compared. A refactor must leave every file byte-identical (volatile provenance
fields — creation time, git commit, timings, process ids — are blanked before hashing).

    python scripts/golden.py run OUT [--kinds demo,ccd,…] [--shared DIR]   # run, write OUT/golden.json
    python scripts/golden.py run OUT --keep                                  # fingerprint OUT's finished runs again
    python scripts/golden.py run OUT --override backend.fast_path=false      # every kind with an override added
    python scripts/golden.py diff A/golden.json B/golden.json                # list what changed

`--shared` (default $PROBE_SHARED_DIR) is the reference folder with the LocQA, BLEnD and
GlobalOpinionQA data; kinds that need it are left out (and named) without it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASE = ["model=tiny", "analysis.n_boot=50", "progress=false"]
# Provenance that differs between two runs of the same code: blanked before hashing.
VOLATILE_KEYS = {"created", "git_commit", "git_dirty", "seconds", "wall_seconds", "elapsed_s", "elapsed",
                 "finished", "started", "pid", "hostname", "platform", "timings", "duration_s", "run_seconds",
                 "scoring_seconds", "prompts_per_second", "tokens_per_second", "peak_memory", "peak_rss_bytes",
                 "command", "argv"}
VOLATILE_TEXT = [re.compile(p) for p in (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?",  # timestamps
    r"\b[0-9a-f]{40}\b",                                             # commits
    r"\d+(\.\d+)? ?(s|seconds|prompts/s|tokens/s)\b",                # timings in prose
    r"probe pid \d+",
)]


def ccd_file(path: Path) -> Path:
    clusters = ["anglo", "eastern_europe", "latin-america", "latin_europe", "confucian_asia",
                "nordic_europe", "sub-saharan_africa", "southern-asia", "germanic_europe", "middle_east"]
    domains = ["Arts", "Education", "Family", "Wellness", "Work", "Scientific", "Lifestyle"]
    items = [{"Question": f"Dilemma {i}: how should the group decide?", "Domain": domains[i % 7],
              **{c: f"Approach {j} for dilemma {i}" for j, c in enumerate(clusters)}} for i in range(4)]
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def kinds(out: Path, shared: Path | None) -> dict[str, list[str] | Callable[[], list[str]]]:
    demo = ["bench=demo", "bench.limit=3"]
    runs: dict[str, list[str] | Callable[[], list[str]]] = {
        "demo": demo,
        "demo_c0": [*demo, "bench.conditions=[C0]"],
        "demo_text": [*demo, "backend.mode=letters+text"],
        "demo_cloze": [*demo, "backend.mode=text", "bench.conditions=[C0]"],
        "demo_generate": ["bench=demo", "bench.limit=2", "backend.mode=generate", "backend.max_new_tokens=8"],
        "demo_factors": ["bench=demo", "bench.limit=2", "bench.conditions=[C0]", "factors=[labels,cue]"],
        "demo_lens": [*demo, "analysis.logit_lens=true", "analysis.capture_layers=[1]"],
        "demo_noprefix": [*demo, "backend.prefix_reuse=false"],
        "demo_steer": lambda: ["bench=demo", "bench.limit=3", "intervention=steer",
                               f"intervention.vectors={out / 'demo_lens'}", "intervention.layer=1",
                               "intervention.group=China", "intervention.alpha=2"],
        "demo_patch": ["bench=demo", "bench.limit=2", "intervention=patch"],
        "ccd": lambda: ["bench=ccd", f"bench.path={ccd_file(out / 'ccd.json')}"],
        "ccd_latin": lambda: ["bench=ccd", f"bench.path={ccd_file(out / 'ccd.json')}", "bench.design=latin_square"],
        "tiny_gemma3": ["model=tiny-gemma3", *demo],
    }
    if shared is not None:
        data = shared / "data"
        runs["locqa"] = ["bench=locqa", f"bench.path={data / 'locqa' / 'locqa.json'}", "judge=rules",
                         "backend.max_new_tokens=8", "bench.limit=2"]
        runs["blend"] = ["bench=blend", f"bench.path={data / 'blend'}", "bench.limit=3",
                         "backend.max_new_tokens=8"]
        runs["globalopinion"] = ["bench=globalopinion",
                                 f"bench.path={data / 'globalopinion' / 'global_opinions_subset.csv'}",
                                 "bench.limit=6"]
        runs["globalopinion_factors"] = [*runs["globalopinion"], "factors=[labels]"]  # type: ignore[list-item]
    return runs


def volatile(key: str) -> bool:
    return key in VOLATILE_KEYS or key.endswith(("_s", "_per_s", "_seconds"))


def normalise(path: Path, out: Path) -> bytes:
    """The file's bytes with volatile provenance blanked (JSON keys; timestamps and timings in text)
    and the output folder and checkout written as placeholders (two golden runs live apart)."""
    raw = path.read_bytes()
    if path.suffix in {".json", ".md", ".html", ".yaml", ".txt", ".log", ""}:
        raw = raw.replace(str(out).encode(), b"<out>").replace(str(REPO).encode(), b"<repo>")
    if path.suffix == ".json":
        def scrub(obj: object) -> object:
            if isinstance(obj, dict):
                return {k: ("<volatile>" if volatile(k) else scrub(v)) for k, v in obj.items()}
            if isinstance(obj, list):
                return [scrub(v) for v in obj]
            return obj
        try:
            return json.dumps(scrub(json.loads(raw)), sort_keys=True).encode()
        except json.JSONDecodeError:
            return raw
    if path.suffix in {".md", ".html", ".yaml", ".txt", ".log", ""}:
        text = raw.decode("utf-8", errors="replace")
        for pattern in VOLATILE_TEXT:
            text = pattern.sub("<volatile>", text)
        return text.encode()
    return raw


def fingerprint(run_dir: Path, out: Path) -> dict[str, str]:
    skip = {".lock"}
    return {str(p.relative_to(run_dir)): hashlib.sha256(normalise(p, out)).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name not in skip}


def run_all(out: Path, only: set[str] | None, shared: Path | None, keep: bool = False,
            overrides: tuple[str, ...] = ()) -> None:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PROBE_CACHE": str(out / "cache"), "HF_HUB_OFFLINE": "1"}
    table: dict[str, dict[str, str] | str] = {}
    for name, args in kinds(out, shared).items():
        if only and name not in only:
            continue
        argv = args() if callable(args) else args
        run_dir = out / name
        if (run_dir / "DONE").is_file() and keep:
            table[name] = fingerprint(run_dir, out)
            continue
        proc = subprocess.run([sys.executable, "-m", "probe", *BASE, *argv, *overrides, f"hydra.run.dir={run_dir}"],
                              cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            table[name] = f"failed rc={proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
            print(f"{name}: FAILED rc={proc.returncode}\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        table[name] = fingerprint(run_dir, out.resolve())
        print(f"{name}: {len(table[name])} files")
    if shared is None:
        print("no reference folder: locqa, blend and globalopinion left out", file=sys.stderr)
    (out / "golden.json").write_text(json.dumps(table, indent=1, sort_keys=True))


def diff(a: Path, b: Path) -> int:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    changed = 0
    for name in sorted(set(left) | set(right)):
        la, rb = left.get(name), right.get(name)
        if not isinstance(la, dict) or not isinstance(rb, dict):
            if la != rb:
                print(f"{name}: " + (f"{la!r} vs {rb!r}" if isinstance(la, str) or isinstance(rb, str)
                                     else "only in A" if rb is None else "only in B"))
                changed += 1
            continue
        for f in sorted(set(la) | set(rb)):
            if la.get(f) != rb.get(f):
                state = "only in A" if f not in rb else "only in B" if f not in la else "differs"
                print(f"{name}/{f}: {state}")
                changed += 1
    print(f"{changed} file(s) differ" if changed else "identical: every file of every run kind")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--kinds", default="")
    r.add_argument("--shared", type=Path, default=os.environ.get("PROBE_SHARED_DIR"))
    r.add_argument("--keep", action="store_true", help="fingerprint finished runs in OUT again instead of rerunning them")
    r.add_argument("--override", action="append", default=[],
                   help="a config override added to every kind (repeatable), e.g. backend.fast_path=false")
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.cmd == "diff":
        return diff(args.a, args.b)
    shared = args.shared if args.shared and Path(args.shared).is_dir() else None
    run_all(args.out, set(filter(None, args.kinds.split(","))) or None, shared, args.keep, tuple(args.override))
    return 0


if __name__ == "__main__":
    sys.exit(main())
