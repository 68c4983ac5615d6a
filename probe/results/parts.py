"""Checkpointed table parts: how every long pass (scoring, generation) survives a kill.

Rows are appended as parquet parts in one directory. Each part is written to a temporary name
and renamed into place when complete, then its sha256 is recorded in `index.json` (itself
replaced atomically). On recovery a part counts only if the index lists it with a matching
checksum and it reads back with the expected schema and unique keys, so a `.tmp` (interrupted
write), an unlisted part (cut off before its checksum) and a damaged part (a flipped bit can
still read as valid parquet) are all removed and their rows computed again.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from probe.files import make_dirs, sha256_file, write_json
from probe.results.io import write_table
from probe.results.layout import PART_INDEX

log = logging.getLogger(__name__)


class PartStore:
    """Parts of one table under `directory`, keyed by the integer column `key` (unique overall)."""

    def __init__(self, directory: Path, schema: pa.Schema, key: str = "prompt_id") -> None:
        self.dir, self.schema, self.key = directory, schema, key
        make_dirs(self.dir)
        self.done: set[int] = set()
        """Keys of the rows already stored by this or an earlier, interrupted pass."""
        self._index: dict[str, str] = {}
        self._next = 0
        self._recover()

    def _recover(self) -> None:
        for tmp in self.dir.glob(".*.tmp"):
            tmp.unlink()
        index = self._read_index()
        numbers = [-1]
        for part in sorted(self.dir.glob("part-*.parquet")):
            try:
                if index.get(part.name) != sha256_file(part):
                    raise ValueError("missing from index.json" if part.name not in index else "sha256 mismatch")
                table = pq.read_table(part)
                keys = table.column(self.key).to_pylist()
                if table.schema != self.schema or len(set(keys)) != len(keys) or self.done & set(keys):
                    raise ValueError("unexpected schema or repeated keys")
            except (OSError, ValueError, KeyError, pa.ArrowException) as e:
                log.warning("%s is damaged (%s); its rows will be computed again", part, e)
                part.unlink()
                continue
            self.done.update(keys)
            self._index[part.name] = index[part.name]
            numbers.append(int(part.stem.split("-")[1]))
        self._next = max(numbers) + 1
        write_json(self.dir / PART_INDEX, self._index)

    def _read_index(self) -> dict[str, str]:
        path = self.dir / PART_INDEX
        try:
            index = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            log.warning("%s is unreadable; every part will be treated as unlisted", path)
            return {}
        return index if isinstance(index, dict) else {}

    def append(self, table: pa.Table) -> None:
        """Store `table` (this store's schema) as the next part, checksummed."""
        assert table.schema == self.schema, "a part must have the store's schema"
        part = self.dir / f"part-{self._next:05d}.parquet"
        write_table(part, table)
        self._index[part.name] = sha256_file(part)
        write_json(self.dir / PART_INDEX, self._index)
        self.done.update(table.column(self.key).to_pylist())
        self._next += 1

    def read(self) -> pa.Table:
        """Every stored row, sorted by key."""
        files = sorted(self.dir / name for name in self._index)
        table = pa.concat_tables([pq.read_table(f) for f in files]) if files else self.schema.empty_table()
        return table.sort_by(self.key)

    def remove(self) -> None:
        """Delete the parts (once the final files are complete and `DONE` is written)."""
        shutil.rmtree(self.dir, ignore_errors=True)
