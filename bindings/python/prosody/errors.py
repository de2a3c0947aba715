"""Error classes of handlers and keyed state, and the classification decorators.

A handler failure is *permanent* when the exception has a truthy
``is_permanent`` attribute and *transient* otherwise (a plain exception is
transient and is retried).
"""

from __future__ import annotations

import asyncio
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar, cast

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
    """Base of the errors that say whether a handler failure is worth retrying."""

    @property
    @abstractmethod
    def is_permanent(self) -> bool:
        """True when retrying cannot help."""


class TransientError(EventHandlerError):
    """A failure that may go away: the event is retried."""

    is_permanent = False


class PermanentError(EventHandlerError):
    """A failure that retrying cannot fix: the event is not retried."""

    is_permanent = True


class StateError(Exception):
    """Brand shared by every keyed-state error: ``except StateError`` catches them all."""

    __slots__ = ()


class PermanentStateError(StateError, PermanentError):
    """A keyed-state failure a retry cannot resolve (e.g. an unregistered collection)."""


class TransientStateError(StateError, TransientError):
    """A keyed-state failure that is retried (store errors, caller mistakes)."""


class NullValueError(TransientStateError, ValueError):
    """Writing None / JSON null; use clear() or remove() to delete instead."""


def create_error_decorator(
    error_cls: type[EventHandlerError],
) -> Callable[..., Callable[[F], F]]:
    """Makes a decorator factory that re-raises the listed exception types as ``error_cls``."""

    def factory(*exc_types: type[BaseException]) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            if asyncio.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    try:
                        return await fn(*args, **kwargs)
                    except exc_types as e:
                        raise error_cls(str(e)) from e

                return cast(F, async_wrapper)

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                except exc_types as e:
                    raise error_cls(str(e)) from e

            return cast(F, sync_wrapper)

        return decorate

    return factory


transient = create_error_decorator(TransientError)
"""``@transient(KeyError, ...)``: the listed exceptions become TransientError."""

permanent = create_error_decorator(PermanentError)
"""``@permanent(TypeError, ...)``: the listed exceptions become PermanentError (not retried)."""
