"""Plotting primitives shared by every bench's figures (bars with CIs, annotated heatmaps, Lorenz
curves, per-layer lens curves) and the `Figure` record reports embed.

Figures are drawn from stored run files only (no model). A bench draws its own figures with
these (see its `figures` module); `probe report` collects them into the HTML page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probe.files import open_new
from probe.types import GroupNoun


@dataclass(frozen=True)
class Figure:
    """One written PNG and what it shows."""

    name: str
    path: Path
    caption: str


def pyplot() -> Any:
    """matplotlib's pyplot on the headless Agg backend (imported on first use: it is slow to load)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def num(v: Any) -> float:
    """A metric value as a float, NaN for null."""
    return float("nan") if v is None else float(v)


def save(fig: Any, out_dir: Path, name: str, caption: str) -> Figure:
    """Write `fig` as `out_dir/name` (PNG), close it, and return it with its caption."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    write_png(fig, path)
    return Figure(name=name, path=path, caption=caption)


def write_png(fig: Any, path: Path) -> None:
    """Write `fig` as a PNG at `path` (atomically, never through a link) and close it."""
    with open_new(path) as f:
        fig.savefig(f, format="png", dpi=120)
    pyplot().close(fig)


def yerr(values: np.ndarray, ci: Mapping[str, Any] | None, keys: Sequence[str]) -> np.ndarray | None:
    """`[2, n]` error-bar lengths from `{key: [lo, hi]}` (0 where a bound is missing)."""
    if not ci:
        return None
    bounds = np.array([[num(b) for b in (ci.get(k) or [None, None])] for k in keys])
    err = np.stack([values - bounds[:, 0], bounds[:, 1] - values])
    return np.clip(np.nan_to_num(err, nan=0.0), 0.0, None)


def bars(ax: Any, shares: Mapping[str, Any], ci: Mapping[str, Any] | None, keys: Sequence[str]) -> None:
    """Bars of `shares[k]` with CI whiskers and a dotted uniform line at 1/len(keys)."""
    values = np.array([num(shares[k]) for k in keys])
    ax.bar(np.arange(len(keys)), values, yerr=yerr(values, ci, keys), capsize=3, color="tab:blue")
    ax.axhline(1 / len(keys), color="grey", ls=":", lw=1)
    ax.set_xticks(np.arange(len(keys)), keys, rotation=45, ha="right")


def reading_bars(ax: Any, readings: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any] | None]],
                 keys: Sequence[str]) -> None:
    """Side-by-side bars of several readings of one distribution (`(label, shares, ci)`, e.g.
    expected and debiased), each with CI whiskers, a legend, and a dotted uniform line."""
    width = 0.8 / max(len(readings), 1)
    x = np.arange(len(keys))
    for i, (label, shares, ci) in enumerate(readings):
        values = np.array([num(shares.get(k)) for k in keys])
        ax.bar(x + (i - (len(readings) - 1) / 2) * width, values, width, yerr=yerr(values, ci, keys), capsize=2,
               color=READING_COLOURS[i % len(READING_COLOURS)], label=label)
    ax.axhline(1 / len(keys), color="grey", ls=":", lw=1, label="uniform")
    ax.set_xticks(x, keys, rotation=45, ha="right")
    ax.legend(fontsize=7)


READING_COLOURS = ("tab:blue", "tab:orange", "tab:green")


def lorenz(ax: Any, shares: Sequence[float], label: str) -> None:
    """One Lorenz curve (ascending shares against their cumulative sum)."""
    v = np.sort(np.asarray([s for s in shares if np.isfinite(s)], dtype=float))
    if not len(v):
        return
    x = np.linspace(0, 1, len(v) + 1)
    ax.plot(x, np.concatenate([[0.0], np.cumsum(v) / v.sum()]), marker="o", ms=3, label=label)


def lorenz_axes(ax: Any, groups: GroupNoun = GroupNoun()) -> None:
    """The equality diagonal, labels and legend of a Lorenz plot."""
    ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="equality")
    ax.set(xlabel=f"cumulative share of {groups.many} (ascending)", ylabel="cumulative share of selections",
           xlim=(0, 1), ylim=(0, 1))
    ax.set_aspect("equal")
    ax.legend(fontsize=7)


def heatmap(ax: Any, fig: Any, data: np.ndarray, rows: Sequence[str], cols: Sequence[str], label: str,
             center: float | None = None, fmt: str = "{:.3f}") -> None:
    """Annotated heatmap; `center` gives a diverging colour scale symmetric around it."""
    from matplotlib.colors import TwoSlopeNorm

    kw: dict[str, Any] = {"cmap": "viridis"}
    finite = data[np.isfinite(data)]
    if center is not None and finite.size:
        kw = {"cmap": "RdBu_r", "norm": TwoSlopeNorm(center, min(float(finite.min()), center - 1e-9),
                                                     max(float(finite.max()), center + 1e-9))}
    im = ax.imshow(data, aspect="auto", **kw)
    long = max(map(len, cols)) > 3
    ax.set_xticks(np.arange(len(cols)), cols, rotation=45 if long else 0, ha="right" if long else "center")
    ax.set_yticks(np.arange(len(rows)), rows)
    if data.size <= 240:
        for (i, j), v in np.ndenumerate(data):
            if np.isfinite(v):
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=8 if data.size <= 40 else 6,
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.5})
    fig.colorbar(im, ax=ax, label=label)


def lens_caption(groups: GroupNoun) -> str:
    """The lens figure's caption, in the bench's word for its groups."""
    return f"Logit lens: the {groups.one} distribution and the letter-position probabilities read out after every layer."


def plot_layers(table: dict[str, Any], path: Path) -> None:
    """Two panels over layers: group shares (CSD) and letter-position probabilities."""
    plt = pyplot()
    layers = np.arange(len(table["csd"]))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for g in table["groups"]:
        a.plot(layers, [c[g] for c in table["csd"]], label=g)
    a.axhline(1 / len(table["groups"]), color="grey", ls=":", lw=1)
    a.set(xlabel="layer", ylabel="share (exposure-normalised)", title=f"Group distribution through the lens "
          f"({table['condition'] or 'all prompts'})")
    a.legend(fontsize=7, ncol=2)
    probs = np.array(table["letter_probs"])
    for i, letter in enumerate(table["letters"]):
        b.plot(layers, probs[:, i], label=letter)
    b.axhline(1 / probs.shape[1], color="grey", ls=":", lw=1)
    b.set(xlabel="layer", ylabel="P(letter)", title="Letter-position bias through the lens")
    b.legend(fontsize=7, ncol=2)
    write_png(fig, path)
