"""Errors a user can act on. They carry words for a person, never a traceback."""

from __future__ import annotations


class GpuwatchError(Exception):
    """Base for errors shown to the user as a message."""


class ConfigError(GpuwatchError):
    """A mistake in a config file: names the file, the key and what was expected."""

    def __init__(self, file: str, key: str, expected: str, got: object = None) -> None:
        self.file = file
        self.key = key
        self.expected = expected
        self.got = got
        got_text = "" if got is None else f", got {got!r}"
        super().__init__(f"{file}: {key}: expected {expected}{got_text}")
