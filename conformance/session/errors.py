"""The one error the session's library calls raise for bad input (``SessionError``).

A module of its own so that every command module of the session (``commands``,
``identify_command``) raises the same class without importing each other.
"""

from __future__ import annotations

__all__ = ["SessionError"]


class SessionError(ValueError):
    """Bad settings or an implementation that cannot be loaded: a one-line message for the user."""
