"""Running: searches, worker processes, fixture and case replays. Imports the core and forensics.

docs/development.md, "Rooms of the harness", draws the import order."""
