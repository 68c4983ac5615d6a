"""OpinionQA (Santurkar et al., ICML 2023): whose opinions a model reflects, group by group."""
