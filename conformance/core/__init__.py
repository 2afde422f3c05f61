"""The core: cases and their values, the spec's reference with its tolerances, the judges, and
calling an implementation. Imports nothing else of the harness.

docs/development.md, "Rooms of the harness", draws the import order."""
