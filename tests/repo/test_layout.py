"""The test tree mirrors the package: each folder of `tests/` is named after a package of `probe/`,
or is `cli` (the end-to-end command-line suites) or `repo` (the repository's own promises); no test
module sits at the top, where it would belong to no seam."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN = {"cli", "repo", "plugins"}
"""Folders of `tests/` that mirror no package: command-line suites, repository checks, plugin benches."""


def test_the_test_folders_mirror_the_packages() -> None:
    packages = {p.parent.name for p in (ROOT / "probe").glob("*/__init__.py")}
    folders = {d.name for d in (ROOT / "tests").iterdir() if d.is_dir() and not d.name.startswith((".", "_"))}
    assert folders - OWN <= packages, sorted(folders - OWN - packages)
    assert len((folders - OWN) & packages) >= 5
    assert sorted(p.name for p in (ROOT / "tests").glob("test_*.py")) == []
    for folder in folders - {"plugins"}:
        assert list((ROOT / "tests" / folder).glob("test_*.py")), folder
        assert not (ROOT / "tests" / folder / "conftest.py").exists()  # one conftest, seen by every folder
