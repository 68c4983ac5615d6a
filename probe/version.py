"""The package version (read by pyproject.toml and recorded in every manifest)."""

__version__ = "0.1.0"
