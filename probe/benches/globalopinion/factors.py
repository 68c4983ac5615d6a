"""What a prompt-factor run (`factors=…`) analyses on GlobalOpinionQA: countries, not option texts.

The generic factor analysis reads, per (item, variant, group), a share of the item's choice mass;
on this bench the groups would be option texts ("Approve", "DK/Refused"), which say nothing about
whose opinions the model holds. Here (`Factors.cube`) the items are questions, the groups are
the countries (survey labels) and the response is each (question, country) lift under each
variant: the similarity of the variant's rotation-mean distribution (the reference condition,
`default`) to the country's answer shares, minus the uniform model's.

The generic analysis reads shares of all G groups that sum to 1 per (item, variant), with 1/G as
its reference, so the lift enters as `s = (1 + lift_c) / (G · (1 + m_q))`, `m_q` the mean lift of
the question's countries under that variant, and a country the question does not have gets the
neutral 1/G (a 0 there would make the country's main effect its question count, not its lift).
Then `s − 1/G = (lift_c − m_q) / (G · (1 + m_q))`: the country's lift centred within the question,
monotone in the lift and free of the uniform model's spread (the raw similarity would bring back
how evenly a country's respondents split); lift ∈ [−1, 1] keeps every share ≥ 0. The variant's
mean lift, centred away here, is the bench's headline per variant (`format.variants`). `lifts`
gives the plain lifts for an analysis that reads any response.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from probe.benches.globalopinion.measures import similarity
from probe.benches.globalopinion.metrics import human_shares
from probe.benches.globalopinion.prompts import HUMAN
from probe.metrics.factorial_shares import ShareCube
from probe.metrics.variant_shares import VARIANT, analysed_condition
from probe.probs import choice_probs
from probe.results.scores import ScoreTable
from probe.types import Design


def lifts(table: ScoreTable, design: Design, names: Sequence[str], temperature: float = 1.0) -> pd.DataFrame:
    """One row per (question, variant, country) of the analysed condition: `item_id`, `variant`
    (its name), `group` (the country's survey label) and `lift`."""
    condition = analysed_condition(table, design)
    if condition is not None:
        table = table.subset(table.conditions(design) == condition)
    order = np.asarray(table.order)
    shown = order >= 0
    probs = choice_probs(np.where(shown, table.logprobs.astype(np.float64), -np.inf), temperature)
    human: dict[str, dict[str, list[float]]] = {}
    for item, text in zip(table.item_id, table.column(HUMAN)):
        if text is not None and str(item) not in human:
            human[str(item)] = human_shares(text, item)
    item_ids = np.array([str(i) for i in table.item_id], dtype=object)
    variant = np.asarray(table.column(VARIANT))
    rows = []
    for item in dict.fromkeys(item_ids.tolist()):
        shares = human[item]
        k = len(next(iter(shares.values())))
        for v, name in enumerate(names):
            mine = (item_ids == item) & (variant == v)
            dist = np.zeros(order.shape[1])
            np.add.at(dist, order[mine][shown[mine]], probs[mine][shown[mine]])
            dist = dist[:k] / max(int(mine.sum()), 1)
            for country, h in shares.items():
                q = np.asarray(h, dtype=np.float64)
                lift = float(similarity(dist, q) - similarity(np.full(k, 1.0 / k), q))
                rows.append({"item_id": item, "variant": name, "group": country, "lift": lift})
    return pd.DataFrame(rows, columns=["item_id", "variant", "group", "lift"])


def factor_cube(table: ScoreTable, design: Design, names: Sequence[str], temperature: float = 1.0) -> ShareCube:
    """`Factors.cube`: `[question, variant, country]` lift shares (see the module doc)."""
    frame = lifts(table, design, names, temperature)
    items = list(dict.fromkeys(frame["item_id"]))
    groups = sorted(set(frame["group"]))
    lift = np.full((len(items), len(names), len(groups)), np.nan)
    index = (pd.Index(items).get_indexer(frame["item_id"]), pd.Index(list(names)).get_indexer(frame["variant"]),
             pd.Index(groups).get_indexer(frame["group"]))
    lift[index] = frame["lift"].to_numpy()
    mean = np.nanmean(lift, axis=-1, keepdims=True)  # every question has ≥ 1 country
    cube = np.where(np.isnan(lift), 1.0 + mean, 1.0 + lift) / (len(groups) * (1.0 + mean))
    return ShareCube(items=tuple(items), variants=tuple(names), groups=tuple(groups), shares=cube)
