"""Messages the dashboard posts to itself."""

from __future__ import annotations

from textual.message import Message


class SourceChanged(Message):
    """The source has new data. Only the newest matters, so a queued one is replaced."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SourceChanged)
