from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "EventHandlerError",
    "TransientError",
    "PermanentError",
    "StateError",
    "PermanentStateError",
    "TransientStateError",
    "NullValueError",
    "transient",
    "permanent",
    "create_error_decorator",
]

F = TypeVar("F", bound=Callable[..., Any])

class EventHandlerError(Exception, ABC):
    @property
    @abstractmethod
    def is_permanent(self) -> bool: ...

class TransientError(EventHandlerError):
    is_permanent: bool

class PermanentError(EventHandlerError):
    is_permanent: bool

class StateError(Exception): ...
class PermanentStateError(StateError, PermanentError): ...
class TransientStateError(StateError, TransientError): ...
class NullValueError(TransientStateError, ValueError): ...

def create_error_decorator(
    error_cls: type[EventHandlerError],
) -> Callable[..., Callable[[F], F]]: ...
def transient(*exc_types: type[BaseException]) -> Callable[[F], F]: ...
def permanent(*exc_types: type[BaseException]) -> Callable[[F], F]: ...
