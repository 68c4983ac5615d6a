"""Parquet writes that a reader never sees half-done (temporary name, then an atomic rename)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_table(path: Path, table: pa.Table) -> None:
    """Write `table` to `path` through a temporary file and an atomic rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
