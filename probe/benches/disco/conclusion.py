"""What a DiSCo report says first, in plain words: how evenly the model spreads its picks over
the cultures with no cue, and how often it picks the culture it is asked for — once for the
`expected` reading and once for the `debiased` one (letter prior removed) — and the terms the
report abbreviates, defined before any table uses them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import opening_paragraphs, undefined

EVEN = ((0.01, "nearly evenly"), (0.1, "somewhat unevenly"), (float("inf"), "very unevenly"))
"""How the report words KL(CSD ‖ uniform) in nats: below 0.01 the largest share is within about
15% of uniform for 12 cultures; above 0.1 some cultures get several times others' share."""

TERMS = (
    ("C0–C3", "the four conditions: C0 no context, C1 a user location, C2 a location and an intent to "
              "get that culture's answer, C3 the four cultures' facts in context"),
    ("CSD", "cultural selection distribution, each culture's exposure-normalised share of selections"),
    ("KL", "Kullback–Leibler divergence of the CSD from uniform, in nats (0 = even)"),
    ("Gini", "Gini coefficient of the CSD (0 = even)"),
    ("CR", "compliance rate, the probability of picking the cued culture's option (chance 1/4)"),
    ("SL", "stickiness lift, CR at C1 minus the culture's C0 share"),
    ("PSI", "prior stickiness index, 1 − CR at C2"),
    ("SPD", "selection parity difference, high-resource minus low-resource cultures' mean share "
            "(SPD_compliance: the same on CR)"),
    ("JSD", "Jensen–Shannon divergence between the C3 and C0 CSDs, in bits"),
    ("PPR", "primacy pick rate, the probability of picking the option whose fact is listed first (chance 1/4)"),
    ("CSC", "cultural selection consistency, the same culture picked under all four context rotations"),
    ("CI", "95% confidence interval, a bootstrap over items"),
    ("T", "the sampling temperature"),
    ("π", "the letter prior, the model's preference for a letter whatever it shows"),
    ("K", "the number of options (4)"),
    ("j", "the context rotation: which culture's fact is listed first at C3"),
    ("H", "the entropy of the letter distribution (H/ln 4: 1 = uniform)"),
)
"""Every abbreviation a DiSCo report uses, in the order of the `Terms` paragraph."""


def opening(m: Mapping[str, Any]) -> list[str]:
    """The conclusion paragraph and the terms paragraph that open the report."""
    parts = [_reading(m, "expected", long=True)]
    if m.get("debiased") is not None:
        parts.append(_reading(m, "debiased", long=False))
    else:
        parts.append("No debiased reading: the run's letter prior could not be estimated (see *Letter prior "
                     "and content*).")
    if m.get("letter_warnings"):
        parts.append("The letter drives the answers (warning below): the debiased reading is the one that speaks "
                     "about culture.")
    return opening_paragraphs(parts, _terms(m))


CONDITIONS = {"C0": "no context", "C1": "a user location",
              "C2": "a location and an intent to get that culture's answer",
              "C3": "the four cultures' facts in context"}
"""Each condition in the words of the `Terms` paragraph."""


def _terms(m: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """`TERMS`, the conditions' entry naming only the conditions the run has (all four: `C0–C3`)."""
    have = [c for c in CONDITIONS if c in (m.get("expected") or {})]
    if not have or len(have) == len(CONDITIONS):
        return TERMS
    name = ", ".join(have)
    meaning = (f"the condition{'s' if len(have) > 1 else ''} of this run: "
               + ", ".join(f"{c} {CONDITIONS[c]}" for c in have))
    return ((name, meaning), *TERMS[1:])


def _reading(m: Mapping[str, Any], block: str, long: bool) -> str:
    """Evenness at C0 and compliance at C2 (else C1) of one reading, in words with the numbers;
    `long` spells out what the abbreviations stand for (the first reading)."""
    tree, cis = m.get(block) or {}, (m.get("ci95") or {}).get(block) or {}
    head = ("Expected reading (probability-weighted picks):" if block == "expected"
            else "Debiased reading (letter prior removed):")
    clauses = []
    kl, csd = get_path(tree, "C0.KL"), get_path(tree, "C0.CSD") or {}
    shares = {c: v for c, v in csd.items() if not undefined(v)}
    if not undefined(kl) and shares:
        what = ("cultural selection distribution, CSD; Kullback–Leibler (KL) divergence from uniform" if long
                else "KL")
        clauses.append(_evenness(m, block, kl, shares, what))
    cond = next((c for c in ("C2", "C1") if not undefined(get_path(tree, f"{c}.CR"))), None)
    if cond is not None:
        cr, interval = get_path(tree, f"{cond}.CR"), get_path(cis, f"{cond}.CR")
        k = len((m.get("letter_pick_shares") or {}).get(cond) or {}) or 4
        cue = "a location and an intent" if cond == "C2" else "a location"
        what = "compliance rate, CR" if long else "CR"
        clauses.append(f"cued with {cue} ({cond}) it picks the cued culture {_chance(cr, interval, k)} "
                       f"({what} {_with_ci(cr, interval)}; chance {1 / k:.2f})")
    return f"{head} {'; '.join(clauses)}." if clauses else ""


ALPHA = 0.05
"""A culture is named as most or least chosen only when the test of no preference rejects at this level."""


def _evenness(m: Mapping[str, Any], block: str, kl: float, shares: Mapping[str, float], what: str) -> str:
    """The C0 clause: the KL with its interval and the test of no preference; the most and least
    chosen cultures, with their simultaneous 95% intervals, only when the test rejects, else the
    largest deviation from uniform with its band and no culture named (one would be by chance)."""
    cis = (m.get("ci95") or {}).get(block) or {}
    p = get_path((m.get("p") or {}).get(block), "C0.KL")
    band = get_path((m.get("sim95") or {}).get(block), "C0.CSD") or {}
    uniform = 1 / len(shares)
    kl_text = f"{what} {_with_ci(kl, get_path(cis, 'C0.KL'))} nats"
    if p is None:  # no test stored (no bootstrap): the numbers alone, no culture named
        return f"with no cue (C0) the picks over the {len(shares)} cultures have {kl_text} (uniform share {uniform:.3f})"
    test = f"test of no preference p = {p:.3g}"
    if p >= ALPHA:
        dev = max(abs(v - uniform) for v in shares.values())
        half = max(((hi - lo) / 2 for lo, hi in band.values() if not undefined(lo)), default=float("nan"))
        within = f", each share within ±{half:.3f} at 95% over all cultures at once" if not undefined(half) else ""
        return (f"with no cue (C0) there is no detectable preference among the {len(shares)} cultures ({test}; "
                f"{kl_text}; the largest deviation of a culture's share from uniform {uniform:.3f} is {dev:.3f}"
                f"{within}; no culture is singled out)")
    fixed = get_path(m.get(block), "C0.KL_corrected")  # the bias-corrected KL words the evenness
    word = next(w for bound, w in EVEN if (kl if fixed is None else fixed) < bound)
    top, low = max(shares, key=shares.get), min(shares, key=shares.get)
    return (f"with no cue (C0) the picks spread {word} over the {len(shares)} cultures ({kl_text}, {test}; "
            f"most {top} {_with_ci(shares[top], band.get(top))}, least {low} {_with_ci(shares[low], band.get(low))}, "
            f"simultaneous 95% intervals; uniform {uniform:.3f})")


def _with_ci(value: float, interval: Any) -> str:
    if interval and not undefined(interval[0]):
        return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
    return f"{value:.3f}"


def _chance(value: float, interval: Any, k: int) -> str:
    """Above, below or at chance (1/k), by the 95% interval where there is one."""
    lo, hi = (interval[0], interval[1]) if interval and not undefined(interval[0]) else (value, value)
    if lo > 1 / k:
        return "more often than chance"
    if hi < 1 / k:
        return "less often than chance"
    return "no more often than chance"
