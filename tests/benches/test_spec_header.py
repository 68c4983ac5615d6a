"""The shared opening of every bench block (`probe.benches.spec_header`): inherited fields keep
their base's docstring unless the bench says more, and every bench spec starts with them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from probe.benches.registry import BUILTIN
from probe.benches.spec_header import BenchHeader, DownloadedBench
from probe.config import field_docs


@dataclass(frozen=True)
class _Plain(DownloadedBench):
    name: str = "plain"
    url: str = "https://example.org/x.json"
    sha256: str | None = "ab" * 32
    """This bench's own word on its checksum."""
    extra: int = 1
    """A field of this bench only."""


def test_field_docs_inherit_unless_redeclared_with_a_docstring() -> None:
    docs = field_docs(_Plain)
    assert docs["name"] == "Run label (output directory, reports)."  # redeclared without a docstring
    assert docs["url"] == "The published file, downloaded once into $PROBE_CACHE/data."
    assert docs["sha256"] == "This bench's own word on its checksum."  # its own wins
    assert docs["extra"] == "A field of this bench only."
    assert [f.name for f in dataclasses.fields(_Plain)][:6] == ["name", "kind", "path", "url", "sha256",
                                                                "max_download_bytes"]


def test_every_builtin_bench_spec_opens_with_the_shared_header() -> None:
    downloaded = 0
    for task in BUILTIN:
        spec, kind = task.data.spec_type, task.kind
        names = [f.name for f in dataclasses.fields(spec)]
        assert issubclass(spec, BenchHeader), kind
        assert names[:3] == ["name", "kind", "path"], kind
        if issubclass(spec, DownloadedBench):
            downloaded += 1
            assert names[3:6] == ["url", "sha256", "max_download_bytes"], kind
            assert spec().url.startswith("https://"), kind  # each redeclares its own source
        defaults = spec()
        assert defaults.kind == kind and defaults.name == kind  # each bench names itself by default
        assert all(field_docs(spec).get(n) for n in names[:3]), kind
    assert downloaded == len(BUILTIN) - 2  # all but the hub-hosted one and OpinionQA (never downloaded: a user path)
