"""Moved to ``conformance/structure.py`` (the value builder needs it too);
re-exported here for the strategies and for tests that import it."""

from ..structure import *  # noqa: F403
from ..structure import __all__  # noqa: F401
