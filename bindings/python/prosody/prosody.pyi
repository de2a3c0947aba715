"""ProsodyClient and AdminClient (type information)."""

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal, Protocol

from typing_extensions import TypeVar

from .handler import EventHandler
from .message import JSONValue

__all__ = ["ProsodyClient", "AdminClient"]

P = TypeVar("P", default=JSONValue)

Duration = float | timedelta
StringOrList = str | list[str]

class _Definition(Protocol):
    def to_config(self) -> dict[str, Any]: ...

class ProsodyClient:
    """A Kafka client. Options left out come from PROSODY_* variables, then defaults."""

    def __init__(
        self,
        *,
        bootstrap_servers: StringOrList | None = ...,
        mock: bool | None = ...,
        source_system: str | None = ...,
        send_timeout: Duration | None = ...,
        group_id: str | None = ...,
        idempotence_cache_size: int | None = ...,
        idempotence_version: str | None = ...,
        idempotence_ttl: Duration | None = ...,
        subscribed_topics: StringOrList | None = ...,
        allowed_events: StringOrList | None = ...,
        max_concurrency: int | None = ...,
        max_uncommitted: int | None = ...,
        stall_threshold: Duration | None = ...,
        shutdown_timeout: Duration | None = ...,
        poll_interval: Duration | None = ...,
        commit_interval: Duration | None = ...,
        mode: Literal['pipeline', 'low-latency', 'best-effort'] | None = ...,
        retry_base: Duration | None = ...,
        max_retries: int | None = ...,
        max_retry_delay: Duration | None = ...,
        failure_topic: str | None = ...,
        probe_port: int | None = ...,
        slab_size: Duration | None = ...,
        cassandra_nodes: StringOrList | None = ...,
        cassandra_keyspace: str | None = ...,
        cassandra_datacenter: str | None = ...,
        cassandra_rack: str | None = ...,
        cassandra_user: str | None = ...,
        cassandra_password: str | None = ...,
        cassandra_retention: Duration | None = ...,
        cassandra_ssl_enabled: bool | None = ...,
        cassandra_ssl_ca_location: str | None = ...,
        cassandra_ssl_certificate_location: str | None = ...,
        cassandra_ssl_key_location: str | None = ...,
        cassandra_ssl_server_name: str | None = ...,
        cassandra_enable_ssl_certificate_verification: bool | None = ...,
        security_protocol: Literal['plaintext', 'ssl', 'sasl_plaintext', 'sasl_ssl', 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'] | None = ...,
        sasl_mechanism: Literal['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'] | None = ...,
        sasl_username: str | None = ...,
        sasl_password: str | None = ...,
        sasl_oauthbearer_token_file: str | None = ...,
        ssl_ca_location: str | None = ...,
        ssl_certificate_location: str | None = ...,
        ssl_key_location: str | None = ...,
        ssl_server_name: str | None = ...,
        enable_ssl_certificate_verification: bool | None = ...,
        scheduler_failure_weight: float | None = ...,
        scheduler_max_wait: Duration | None = ...,
        scheduler_wait_weight: float | None = ...,
        scheduler_cache_size: int | None = ...,
        monopolization_enabled: bool | None = ...,
        monopolization_threshold: float | None = ...,
        monopolization_window: Duration | None = ...,
        monopolization_cache_size: int | None = ...,
        defer_enabled: bool | None = ...,
        defer_base: Duration | None = ...,
        defer_max_delay: Duration | None = ...,
        defer_failure_threshold: float | None = ...,
        defer_failure_window: Duration | None = ...,
        defer_cache_size: int | None = ...,
        defer_store_cache_size: int | None = ...,
        defer_seek_timeout: Duration | None = ...,
        defer_discard_threshold: int | None = ...,
        timeout: Duration | None = ...,
        telemetry_topic: str | None = ...,
        telemetry_enabled: bool | None = ...,
        message_spans: Literal['child', 'follows_from'] | None = ...,
        timer_spans: Literal['child', 'follows_from'] | None = ...,
        state_collections: Sequence[_Definition] | None = ...,
        state_cache_dir: str | None = ...,
        state_cache_size_bytes: int | None = ...,
        state_recovery_delay: Duration | None = ...,
    ) -> None: ...
    def send(self, topic: str, key: str, payload: JSONValue) -> asyncio.Future[None]: ...
    def consumer_state(self) -> asyncio.Future[Literal["unconfigured", "configured", "running"]]: ...
    def subscribe(self, handler: EventHandler[P]) -> asyncio.Future[None]: ...
    def unsubscribe(self) -> asyncio.Future[None]: ...
    def assigned_partition_count(self) -> asyncio.Future[int]: ...
    def is_stalled(self) -> asyncio.Future[bool]: ...
    @property
    def source_system(self) -> str: ...

class AdminClient:
    def __init__(
        self,
        *,
        bootstrap_servers: StringOrList | None = None,
        mock: bool | None = None,
        security_protocol: Literal['plaintext', 'ssl', 'sasl_plaintext', 'sasl_ssl', 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'] | None = None,
        sasl_mechanism: Literal['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'] | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauthbearer_token_file: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_server_name: str | None = None,
        enable_ssl_certificate_verification: bool | None = None,
    ) -> None: ...
    def create_topic(
        self,
        name: str,
        *,
        partition_count: int | None = None,
        replication_factor: int | None = None,
        cleanup_policy: str | None = None,
        retention: Duration | None = None,
    ) -> asyncio.Future[None]: ...
    def delete_topic(self, name: str) -> asyncio.Future[None]: ...
