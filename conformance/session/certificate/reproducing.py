"""What ``ftspec certify --reproduce`` takes from a certificate: the recorded settings, read as
untrusted data and bounded (``REPRODUCE_LIMITS``), and the target it records, shown as text and
never imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from ftspec.impls.api import FLOAT_DTYPES
from ftspec.spec.registry import REGISTRY

from ...core.blocks import MAX_BLOCK
from ...core.profiles import PROFILES
from ...core.verdict import FIXTURE_LEVELS
from .reading import REPRODUCE_LIMITS, CertificateError, Malformed, bad, is_int, is_number, names, show
from .verifying import load, reproduce_command


def _setting(raw: dict[str, Any], key: str, ok: Callable[[Any], bool], want: str) -> Any:
    value = raw.get(key)
    if value is not None and not ok(value):
        raise Malformed(f"field run.settings.{key} must be null or {want}, got {show(value)}")
    return value


def recorded_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """``Settings`` keywords that repeat the certified run, read as untrusted data and bounded
    (``REPRODUCE_LIMITS``): profile, seed, selection, examples, seconds, call timeout, fixtures,
    shards and block. ``jobs`` and ``in_process`` are never taken from the file (how the reproduction runs is
    the caller's choice: worker processes unless told otherwise), nor is anything it does not know.
    Raises CertificateError (one line) for a value out of its bounds."""
    run = doc["run"]
    raw = run.get("settings") or {}
    if not isinstance(raw, dict):
        raise bad("run.settings", "null or a JSON object", raw)
    lim = REPRODUCE_LIMITS
    profile = raw.get("profile", run["profile"])
    if profile != run["profile"] or profile not in PROFILES:
        raise Malformed(f"field run.settings.profile {show(profile)} is not the run's profile "
                        f"{show(run['profile'])}")
    seed = raw.get("seed", run["seed"])
    if seed != run["seed"] or not (is_int(seed) and 0 <= seed <= lim["seed"]):
        raise Malformed(f"field run.settings.seed {show(seed)} is not the run's seed {show(run['seed'])}")
    out: dict[str, Any] = {"profile": profile, "seed": seed}
    for key, allowed in (("algorithms", list(REGISTRY)), ("dtypes", list(FLOAT_DTYPES)), ("devices", None)):
        listed = names(raw.get(key), f"run.settings.{key}", allowed, optional=True)
        out[key] = tuple(listed) if listed else None
    out["examples"] = _setting(raw, "examples", lambda v: is_int(v) and 1 <= v <= lim["examples"],
                               f"a whole number from 1 to {lim['examples']}")
    out["seconds"] = _setting(raw, "seconds", lambda v: is_number(v) and 0 <= v <= lim["seconds"],
                              f"a number of seconds from 0 (no cap) to {lim['seconds']:g}")
    out["call_timeout"] = _setting(raw, "call_timeout", lambda v: is_number(v) and 0 < v <= lim["call_timeout"],
                                   f"a number of seconds above 0, at most {lim['call_timeout']:g}")
    out["fixtures"] = _setting(raw, "fixtures", lambda v: v in FIXTURE_LEVELS, f"one of {', '.join(FIXTURE_LEVELS)}")
    out["shards"] = _setting(raw, "shards", lambda v: is_int(v) and 1 <= v <= lim["shards"],
                             f"a whole number from 1 to {lim['shards']}")
    # a certificate written before blocks drew one value set per case
    out["block"] = _setting(raw, "block", lambda v: is_int(v) and 1 <= v <= MAX_BLOCK,
                            f"a whole number from 1 to {MAX_BLOCK}") or 1
    return out


def recorded_target(doc: dict[str, Any]) -> str:
    """The implementation the certificate records: text to show, never a module to import."""
    return str(doc["subject"]["target"])


def check_reproduction(path: Path | str, impl: Optional[str]) -> dict[str, Any]:
    """The certificate at ``path``, ready to be reproduced on ``impl``: intact, consistent, its
    recorded settings within bounds (``recorded_settings``), and an implementation named by the
    caller. The target the certificate records is never imported: without ``impl`` the
    CertificateError shows it as text with the command that would run it."""
    doc = load(path)
    try:
        recorded_settings(doc)
    except CertificateError as exc:
        raise CertificateError(f"{path}: {exc}") from None
    if not impl:
        target = recorded_target(doc)
        raise CertificateError(f"{path}: name the implementation to run with --impl; the certificate records "
                               f"{target!r}, which is never imported from the file; to run that one, type: "
                               f"{reproduce_command(path, target)}")
    return doc
