"""The package version, in one place (the package, summaries and the CLI read it from here)."""

__version__ = "0.1.0"
