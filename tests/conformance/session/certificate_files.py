"""Certificates as the session tests edit them: a document re-hashed after an edit (so that only the
edit, not a stale hash, is what verification meets), and written where a command can read it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ftspec.conformance.session.certificate import content_hash


def rehashed(doc: dict) -> dict:
    """A copy of ``doc`` with its content hash made anew."""
    doc = copy.deepcopy(doc)
    doc["content_hash"] = content_hash(doc)
    return doc


def written(tmp_path: Path, doc: dict, name: str = "certificate.json") -> Path:
    """``doc`` as JSON in ``tmp_path / name``."""
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path
