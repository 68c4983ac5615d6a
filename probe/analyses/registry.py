"""The analysis registry: every generic analysis, in the order of their report sections and
figures. The only module that lists them.

A new analysis is one module under `probe.analyses` with an `Analysis` subclass, added to
`BUILTIN` here (or `register`ed by a plug-in when it is imported), and its test.
"""

from __future__ import annotations

from probe.analyses.base import Analysis
from probe.analyses.lens import LogitLens
from probe.analyses.patching import Patching
from probe.analyses.prompt_factors import PromptFactors
from probe.analyses.steering import Steering
from probe.analyses.temperature import TemperatureCurve
from probe.benches.task import Column
from probe.errors import ProbeInputError

BUILTIN: tuple[Analysis, ...] = (PromptFactors(), TemperatureCurve(), LogitLens(), Patching(), Steering())
"""The analyses shipped with probe, in report order: the factor section follows the bench's own
markdown; figures go the bench's, factor shares, temperature curve, lens, patching."""
_ANALYSES: list[Analysis] = []


def register(analysis: Analysis) -> Analysis:
    """Add `analysis` after those registered (an error if its name is taken)."""
    if any(a.name == analysis.name for a in _ANALYSES):
        raise ProbeInputError(f"analysis {analysis.name!r} is already registered")
    _ANALYSES.append(analysis)
    return analysis


for _analysis in BUILTIN:
    register(_analysis)


def analyses() -> tuple[Analysis, ...]:
    """Every registered analysis, in registry order."""
    return tuple(_ANALYSES)


def sweep_columns() -> tuple[Column, ...]:
    """The sweep columns of every analysis, in registry order (after a bench's own)."""
    return tuple(c for a in _ANALYSES for c in a.sweep_columns)
