"""The conformance suite itself (ftspec.conformance.suite), quick profile,
on every bundled implementation: part of ``make test``."""

from ftspec.conformance.suite.test_conformance import test_conforms  # noqa: F401
