"""pytest plugin (entry point ``pytest11``): options for the conformance suite."""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ftspec")
    group.addoption("--ftspec-impl", action="append", default=[], metavar="NAME",
                    help="run the conformance suite on this implementation only (repeatable)")
