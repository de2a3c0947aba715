"""OpenTelemetry glue. opentelemetry-api is optional: without it, nothing here costs anything.

Send injects the caller's current context as W3C ``traceparent`` /
``tracestate`` / ``baggage`` (the core writes them as record headers); a
handler runs inside the context extracted from the record's headers, in a span
named ``on_message`` / ``on_timer`` when an SDK tracer provider is installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised when the extra is absent
    AVAILABLE = False

__all__ = ["AVAILABLE", "inject", "handler_scope", "sdk_installed", "message_spans_follow"]

_NO_SCOPE: AbstractContextManager[Any] = nullcontext()

if AVAILABLE:
    _tracecontext = TraceContextTextMapPropagator()
    _baggage = W3CBaggagePropagator()
    _tracer = _trace.get_tracer("prosody")

    def inject() -> dict[str, str]:
        """The caller's current trace context and baggage in W3C wire form."""
        carrier: dict[str, str] = {}
        _tracecontext.inject(carrier)
        _baggage.inject(carrier)
        return carrier

    def sdk_installed() -> bool:
        # Without an SDK the global provider is the API's proxy; spans would
        # be non-recording, so attaching the extracted context is enough.
        return not isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider)

    def handler_scope(
        name: str, carrier: Mapping[str, str], follows_from: bool
    ) -> AbstractContextManager[Any]:
        """A context manager that runs the handler in the record's trace context."""
        parent = None
        if carrier:
            parent = _baggage.extract(carrier, context=_tracecontext.extract(carrier))
        if sdk_installed():
            if follows_from and parent is not None:
                link_ctx = _trace.get_current_span(parent).get_span_context()
                links = [_trace.Link(link_ctx)] if link_ctx.is_valid else []
                # A new trace linked to the producer's span; baggage still flows.
                root = _trace.set_span_in_context(_trace.INVALID_SPAN, parent)
                return _tracer.start_as_current_span(
                    name, context=root, links=links, kind=_trace.SpanKind.CONSUMER
                )
            return _tracer.start_as_current_span(
                name, context=parent, kind=_trace.SpanKind.CONSUMER
            )
        if parent is None:
            return _NO_SCOPE
        return _Attached(parent)

    class _Attached:
        __slots__ = ("_ctx", "_token")

        def __init__(self, ctx: Any) -> None:
            self._ctx = ctx
            self._token: Any = None

        def __enter__(self) -> None:
            self._token = _context.attach(self._ctx)

        def __exit__(self, *exc: object) -> None:
            _context.detach(self._token)

else:

    def inject() -> dict[str, str]:
        return {}

    def sdk_installed() -> bool:
        return False

    def handler_scope(
        name: str, carrier: Mapping[str, str], follows_from: bool
    ) -> AbstractContextManager[Any]:
        return _NO_SCOPE


def message_spans_follow(option: object) -> bool:
    """Whether message spans use follows_from: the option, else PROSODY_MESSAGE_SPANS, else child."""
    value = option if option is not None else os.environ.get("PROSODY_MESSAGE_SPANS", "child")
    return str(value).strip() == "follows_from"


def timer_spans_follow(option: object) -> bool:
    """Whether timer spans use follows_from: the option, else PROSODY_TIMER_SPANS, else follows_from."""
    value = option if option is not None else os.environ.get("PROSODY_TIMER_SPANS", "follows_from")
    return str(value).strip() == "follows_from"
