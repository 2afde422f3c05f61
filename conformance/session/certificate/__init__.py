"""Certificates: a publishable record of what was tested and what it showed.

JSON (schema ``ftspec-certificate/2``) with a Markdown rendering. The
verdict (``conformance/core/verdict.py``) rests on the per-cell results the
certificate records.

A certificate is data that travels between people, like a case file, so
reading one treats it as untrusted input (docs/robustness.md,
"Certificates"): ``casefile.read_untrusted_json`` reads it (a regular file
of at most ``LIMITS["bytes"]``, no FIFO or device, bounded nesting, objects
and arrays, and digits per number), then every field ``--verify`` and
``--reproduce`` read is checked for type and bounds against the table of
fields in ``schema.py`` (``schema.check``) before anything else; each
refusal is one ``CertificateError`` line naming the file and the field. ``ftspec certify --verify FILE`` then checks:

- the ``content_hash`` (sha256 of the canonical JSON of every other field,
  keys sorted, no spaces) matches. This detects accidental damage (a
  truncated download, an editor's reformatting) and nothing more: anyone
  can edit a certificate and compute a new hash. It proves no authorship;
- the certificate is consistent: the verdict re-derived from the recorded
  cells and fixture replays equals the recorded one; every algorithm ×
  dtype × device the implementation declares (within the recorded
  selection) has exactly one cell; a passing cell carries no failure and an
  error ratio that is a number from 0 to 1 (NaN, negative and infinite
  ratios never pass), and so does an ``ok`` fixture replay; the
  per-algorithm summary and the examples counts agree with the cells; the
  minimum is the recorded profile's; when the certificate names this
  installation's fixture set, every fixture replay its selection calls for
  (counted from the recorded declarations, by the replay's own rule) is
  recorded. An edit that flips a verdict must therefore also rewrite the
  results it rests on.

What ``--verify`` cannot detect is a forgery that is consistent with
itself: results rewritten wholesale, with summaries, fixture replays and
hash to match. What would show the results themselves are true is running
them again: ``ftspec certify --reproduce FILE --impl NAME`` runs the
implementation named on the command line (the target the certificate
records is shown, never imported) with the recorded seed and settings,
bounded by ``REPRODUCE_LIMITS`` (``jobs`` and ``in_process`` are never taken
from the file), and compares the verdicts cell by cell
(``session.reproduce``). The searches are seeded, so the same versions on a
machine of the same speed draw the same examples; a time cap makes the
example count depend on speed, so a slower machine may run fewer.

The package, one job a module: ``schema`` (the fields, their types and bounds, as a table, and
``check``), ``reading`` (the bounds, the errors, the readers of structured fields), ``building``,
``derived`` (what building writes and verifying derives again: hash, summaries), ``verifying``,
``reproducing`` (what ``--reproduce`` takes from the file), ``rendering`` (Markdown) and
``document`` (``Certificate``, the document and its files).
"""

from __future__ import annotations

from .building import build
from .derived import content_hash
from .document import Certificate
from .reading import LIMITS, REPRODUCE_LIMITS, CertificateError
from .rendering import listing_lines, render_markdown
from .reproducing import check_reproduction, recorded_settings, recorded_target
from .schema import CERTIFICATE_SCHEMA
from .verifying import consistency, load, reproduce_command, verify

__all__ = ["CERTIFICATE_SCHEMA", "LIMITS", "REPRODUCE_LIMITS", "Certificate", "CertificateError", "build",
           "check_reproduction", "consistency", "content_hash", "listing_lines", "load", "recorded_settings",
           "recorded_target", "render_markdown", "reproduce_command", "verify"]
