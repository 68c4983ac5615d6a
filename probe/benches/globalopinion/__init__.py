"""GlobalOpinionQA: survey questions with 130 countries' answer shares; `data` loads and validates the
upstream CSV, `prompts` renders the paper's protocol, `metrics` the similarity to each country."""
