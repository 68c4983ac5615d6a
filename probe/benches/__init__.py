"""Benchmarks, one package per benchmark (data → items → prompts, metrics, report, figures,
declared as a `Task`), the shared pieces they use (sources, designs, forced-choice hooks), and
the registry that maps a bench `kind` to its task (`probe.benches.registry`)."""
