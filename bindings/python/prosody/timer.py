"""The timer a handler receives when it fires."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["Timer"]


@dataclass(frozen=True, slots=True)
class Timer:
    """A due timer: the key it belongs to and the time (UTC, whole seconds) it was set for."""

    key: str
    time: datetime
