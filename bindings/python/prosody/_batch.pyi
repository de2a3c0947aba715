"""Builds the Python objects of polled events in one C call per batch (_batch.c)."""

from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Any, final

KIND_FAILED: int
KIND_INTERRUPTED: int

@final
class Builder:
    def __init__(
        self,
        buffer: object,
        address: int,
        capacity: int,
        message: type,
        timer: Callable[[str, datetime], object],
        scan: Callable[[str, int], tuple[Any, int]],
        loads: Callable[[bytes], Any],
        fromtimestamp: Callable[[float, tzinfo], datetime],
        utc: tzinfo,
        context: type,
        context_initial: dict[str, Any],
        dispatcher: object,
    ) -> None: ...
    def build(self, n: int, /) -> list[tuple[int, int, Any, dict[str, str] | None, Any]]: ...
