"""The fields that open every bench's `bench:` config block, declared once.

A bench's spec subclasses `BenchHeader` (data from a path or a hub dataset) or `DownloadedBench`
(data from a path or a published URL, checksummed), redeclaring a field only to change its
default (its own name and kind, its URL and checksum) or to say something about it that only that
bench can (which file `path` names). The generated `conf/bench/<kind>.yaml` keeps the field order:
these fields first, then the bench's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from probe.benches.sources import MAX_DOWNLOAD_BYTES
from probe.config import Ge


@dataclass(frozen=True)
class BenchHeader:
    """The name, kind and local path every bench block has."""

    name: str = ""
    """Run label (output directory, reports)."""
    kind: str = ""
    """The registered bench kind."""
    path: str | None = None
    """A local copy of the bench's data; null fetches it from its source."""


@dataclass(frozen=True)
class DownloadedBench(BenchHeader):
    """A bench whose data is a published file (or files), downloaded once and checksummed."""

    url: str = ""
    """The published file, downloaded once into $PROBE_CACHE/data."""
    sha256: str | None = None
    """Expected checksum of the file; a mismatch stops the run."""
    max_download_bytes: Annotated[int, Ge(1)] = MAX_DOWNLOAD_BYTES
    """Largest single file download accepted (bytes); a larger one stops, nothing cached."""
