"""Fixtures shared by the conformance tests."""

from __future__ import annotations

import signal
from typing import Iterator

import pytest


@pytest.fixture
def python_ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler, whatever the test runner installed; put back after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
