"""Prosody (type information)."""


from .context import Context
from .errors import (
    EventHandlerError,
    NullValueError,
    PermanentError,
    PermanentStateError,
    StateError,
    TransientError,
    TransientStateError,
    permanent,
    transient,
)
from .handler import EventHandler, ProsodyHandler
from .message import JSONValue, Message
from .prosody import AdminClient, ProsodyClient
from .state import (
    DequeDefinition,
    DequeState,
    Direction,
    MapDefinition,
    MapState,
    MessageDequeDefinition,
    MessageMapDefinition,
    MessageValueDefinition,
    ValueDefinition,
    ValueState,
    deque,
    map,
    message_deque,
    message_map,
    message_value,
    value,
)
from .timer import Timer

__version__: str

__all__ = [
    "ProsodyClient", "AdminClient", "Context", "EventHandler", "ProsodyHandler",
    "Message", "Timer", "JSONValue",
    "EventHandlerError", "PermanentError", "TransientError", "permanent", "transient",
    "StateError", "PermanentStateError", "TransientStateError", "NullValueError",
    "Direction", "value", "map", "deque", "message_value", "message_map", "message_deque",
    "ValueDefinition", "MapDefinition", "DequeDefinition",
    "MessageValueDefinition", "MessageMapDefinition", "MessageDequeDefinition",
    "ValueState", "MapState", "DequeState",
]
