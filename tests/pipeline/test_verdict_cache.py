"""The cross-run verdict cache trusts only intact entries: a checksum over each entry, and the
task's validator over the stored verdict; anything else is asked again and counted."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from probe.benches.locqa.task import TASK as LOCQA
from probe.benches.task import JudgeJob
from probe.judges import JudgeRequest, JudgeResult
from probe.pipeline.judging import VerdictCache, run_jobs
from probe.results.generations import write_judgements

REQUEST = JudgeRequest("explicit", {"question": "q", "locale": "UK", "response": "Left", "locale_answer": "Left",
                                    "us_answer": "Right"})
JOBS = [JudgeJob(REQUEST, {"prompt_id": 0, "task": "explicit"}, cacheable=True)]


class Judge:
    """Always says the response matches the locale; counts what it was asked."""

    name = "fixed"

    def __init__(self) -> None:
        self.asked = 0

    def judge(self, requests: list[JudgeRequest]) -> list[JudgeResult]:
        self.asked += len(requests)
        return [JudgeResult({"match_locale": True, "mentions_us_answer": False}, None, self.name) for _ in requests]


def _entry(cache: VerdictCache) -> Path:
    [path] = (cache.root or Path()).rglob("*.json")
    return path


def _resign(path: Path, stored: dict) -> None:
    """Rewrite an entry with a checksum that matches (as a probe that wrote it would have)."""
    blob = json.dumps({"key": path.stem, "output": stored["output"], "judge": stored["judge"]}, sort_keys=True)
    path.write_text(json.dumps({**stored, "sha256": hashlib.sha256(blob.encode()).hexdigest()}))


@pytest.fixture
def cache(tmp_path: Path) -> VerdictCache:
    cache = VerdictCache(tmp_path / "judgements", {"name": "fixed"})
    judge = Judge()
    assert run_jobs(judge, JOBS, cache)[0]["match_locale"] is True and judge.asked == 1
    again = Judge()
    assert run_jobs(again, JOBS, cache)[0]["match_locale"] is True and again.asked == 0  # an intact entry is used
    assert not cache.rejected
    return cache


def test_an_edited_entry_is_asked_again(cache: VerdictCache, caplog: pytest.LogCaptureFixture) -> None:
    path = _entry(cache)
    stored = json.loads(path.read_text())
    stored["output"]["match_locale"] = False  # flips the verdict, keeps the old checksum
    path.write_text(json.dumps(stored))
    judge = Judge()
    with caplog.at_level("WARNING", logger="probe.pipeline.judging"):
        rows = run_jobs(judge, JOBS, cache)
    assert rows[0]["match_locale"] is True and judge.asked == 1  # the edit was not used
    assert cache.rejected == {"checksum": 1} and "sha256 does not match its content" in caplog.text
    assert json.loads(path.read_text())["output"]["match_locale"] is True  # rewritten by the fresh verdict


def test_a_wrong_typed_entry_is_asked_again_not_a_crash(cache: VerdictCache, tmp_path: Path) -> None:
    path = _entry(cache)
    stored = json.loads(path.read_text())
    _resign(path, {**stored, "output": {"match_locale": "yes", "mentions_us_answer": False}})
    judge = Judge()
    rows = run_jobs(judge, JOBS, cache)
    assert rows[0]["match_locale"] is True and judge.asked == 1 and cache.rejected == {"schema": 1}
    write_judgements(tmp_path, rows, LOCQA.judging.schema)  # the wrong type never reaches the table writer
    _resign(path, {**stored, "output": {**stored["output"], "dropped": 5}})
    assert cache.get(REQUEST) is None and cache.rejected == {"schema": 2}


@pytest.mark.parametrize("content", ["{not json", json.dumps({"output": {"match_locale": True}, "judge": "fixed"})])
def test_a_damaged_or_unchecksummed_entry_is_asked_again(content: str, cache: VerdictCache) -> None:
    _entry(cache).write_text(content)
    judge = Judge()
    assert run_jobs(judge, JOBS, cache)[0]["match_locale"] is True and judge.asked == 1
    assert cache.rejected == {"unreadable": 1}


def test_an_entry_copied_under_another_request_does_not_match(cache: VerdictCache) -> None:
    other = JudgeRequest("explicit", {**REQUEST.payload, "response": "Right"})
    source = _entry(cache)
    target = cache._path(other)
    assert target is not None
    target.write_bytes(source.read_bytes())  # a valid entry, but of another question
    assert cache.get(other) is None and cache.rejected == {"checksum": 1}
