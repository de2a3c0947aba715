"""The message a handler receives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Union

from typing_extensions import TypeAlias, TypeVar

__all__ = ["Message", "JSONValue"]

JSONValue: TypeAlias = Union[
    None, bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"]
]

P = TypeVar("P", default=JSONValue)


@dataclass(frozen=True, slots=True)
class Message(Generic[P]):
    """A consumed Kafka record with its JSON payload decoded.

    The payload type ``P`` is a static contract only: nothing validates the
    payload at run time.
    """

    topic: str
    partition: int
    offset: int
    timestamp: datetime
    key: str
    payload: P
