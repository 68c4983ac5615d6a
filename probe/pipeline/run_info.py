"""The `run:` block of the config: what a run is called. Presentation only — none of it enters
the run key (`probe.pipeline.provenance.run_key`), so changing it never forces a new run."""

from __future__ import annotations

from dataclasses import dataclass

from probe.results.labels import check_label


@dataclass(frozen=True)
class RunInfo:
    """The `run:` block: how people tell this run from others."""

    label: str | None = None
    """Free-text label (≤ 80 printable characters): shown in `probe runs`, the report header and sweep tables, and appended to the run directory's name; not in the run key."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", check_label(self.label))

    def record(self) -> dict[str, str]:
        """What the manifest records: `{"label": …}` when a label is given, else nothing (so an
        unlabelled run's manifest is what it always was)."""
        return {"label": self.label} if self.label else {}
