"""GlobalOpinionQA's global_opinions.csv as probe's survey table (for `bench=opinionqa bench.format=table`).

    .venv/bin/python scripts/globalopinion_table.py global_opinions.csv survey.jsonl
    probe run bench=opinionqa bench.format=table bench.path=survey.jsonl bench.refusal=keep model=<model>
"""

from __future__ import annotations

import sys
from pathlib import Path

from probe.benches.globalopinion.survey_table import write_survey_table

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(f"{write_survey_table(Path(sys.argv[1]), Path(sys.argv[2]))} rows written to {sys.argv[2]}")
