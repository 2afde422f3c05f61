"""Forensics: explaining a failure (diagnosis, divergence, distinct failures, identify).
Imports the core only.

docs/development.md, "Rooms of the harness", draws the import order."""
