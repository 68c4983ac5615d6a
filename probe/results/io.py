"""Parquet writes that a reader never sees half-done (temporary name, then an atomic rename),
never through a symbolic link (`probe.files.open_new`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from probe.files import open_new


def write_table(path: Path, table: pa.Table) -> None:
    """Write `table` to `path` through a temporary file and an atomic rename."""
    with open_new(path) as f:
        pq.write_table(table, f)
