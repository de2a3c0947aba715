// Type declarations of @prosody-events/prosody. Self-contained: they compile
// with skipLibCheck false and need only the Node types for AbortSignal.

/// <reference types="node" />

// ---------------------------------------------------------------------------
// JSON

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };

/**
 * Checks a payload type recursively: JSON-representable members keep their
 * type, while functions, undefined, Date, symbols and bigints (at any depth)
 * become `never`, so that `send` refuses them at compile time. Optional
 * members stay allowed (JSON.stringify leaves them out).
 */
export type JsonCompatible<T> = T extends JsonPrimitive
  ? T
  : T extends undefined | bigint | symbol | Date | ((...args: any[]) => unknown)
    ? never
    : T extends object
      ? { [K in keyof T]: K extends symbol ? never : JsonCompatible<T[K]> }
      : never;

export type MaybePromise<T> = T | Promise<T>;

// ---------------------------------------------------------------------------
// Enums

export declare const Mode: {
  readonly Pipeline: "Pipeline";
  readonly LowLatency: "LowLatency";
  readonly BestEffort: "BestEffort";
};
export type Mode = (typeof Mode)[keyof typeof Mode];

export declare const ConsumerState: {
  readonly Shutdown: "Shutdown";
  readonly Unconfigured: "Unconfigured";
  readonly Configured: "Configured";
  readonly Running: "Running";
  readonly ConfigurationFailed: "ConfigurationFailed";
};
export type ConsumerState = (typeof ConsumerState)[keyof typeof ConsumerState];

export type ScanDirection = "forward" | "backward";

// ---------------------------------------------------------------------------
// Configuration

export interface ReadCacheConfiguration {
  ttlMs?: number;
  disabled?: boolean;
}

export interface StateCollectionConfig {
  name: string;
  kind: "value" | "map" | "deque";
  payload: "json" | "message";
  ttlSeconds?: number;
  readUncommitted?: boolean;
  published?: boolean;
  readCache?: { ttlMs: number } | false;
  keysetLimit?: number;
  capacity?: number;
}

/**
 * Client options. An option given here wins over its PROSODY_* variable,
 * which wins over the default. `…Ms` options are milliseconds, `…Seconds`
 * and `…S` options seconds.
 */
export interface Configuration extends KafkaSecurity {
  bootstrapServers?: string | string[];
  mock?: boolean;
  sendTimeoutMs?: number;
  groupId?: string;
  idempotenceCacheSize?: number;
  idempotenceVersion?: string;
  idempotenceTtlS?: number;
  subscribedTopics?: string | string[];
  allowedEvents?: string | string[];
  sourceSystem?: string;
  maxConcurrency?: number;
  maxUncommitted?: number;
  stallThresholdMs?: number;
  shutdownTimeoutMs?: number;
  pollIntervalMs?: number;
  commitIntervalMs?: number;
  mode?: Mode;
  retryBaseMs?: number;
  maxRetries?: number;
  maxRetryDelayMs?: number;
  failureTopic?: string;
  /** `null` disables the probe server. */
  probePort?: number | null;
  slabSizeMs?: number;
  cassandraNodes?: string | string[];
  cassandraKeyspace?: string;
  cassandraDatacenter?: string;
  cassandraRack?: string;
  cassandraUser?: string;
  /** Never shown in errors or by util.inspect. */
  cassandraPassword?: string;
  cassandraRetentionSeconds?: number;
  /** Cassandra client encryption; the other cassandraSsl* options need it. */
  cassandraSslEnabled?: boolean;
  cassandraSslCaLocation?: string;
  cassandraSslCertificateLocation?: string;
  cassandraSslKeyLocation?: string;
  /** The name every Cassandra node's certificate must carry, when not the address dialled. */
  cassandraSslServerName?: string;
  /** `false` accepts any Cassandra certificate: development only. */
  cassandraEnableSslCertificateVerification?: boolean;
  schedulerFailureWeight?: number;
  schedulerMaxWaitMs?: number;
  schedulerWaitWeight?: number;
  schedulerCacheSize?: number;
  monopolizationEnabled?: boolean;
  monopolizationThreshold?: number;
  monopolizationWindowMs?: number;
  monopolizationCacheSize?: number;
  deferEnabled?: boolean;
  deferBaseMs?: number;
  deferMaxDelayMs?: number;
  deferFailureThreshold?: number;
  deferFailureWindowMs?: number;
  deferStoreCacheSize?: number;
  loaderCacheSize?: number;
  loaderSeekTimeoutMs?: number;
  loaderDiscardThreshold?: number;
  timeoutMs?: number;
  telemetryTopic?: string;
  telemetryEnabled?: boolean;
  messageSpans?: "child" | "follows_from";
  timerSpans?: "child" | "follows_from";
  stateCollections?: readonly StateCollectionConfig[];
  stateCacheDir?: string;
  stateOwnedCacheSize?: string;
  stateReadCacheSize?: string;
  stateReadCache?: ReadCacheConfiguration;
  stateRecoveryDelaySeconds?: number;
  subsystem?: string;
}

// ---------------------------------------------------------------------------
// Events

/** A consumed Kafka record. `payload` is parsed from JSON on first read. */
export declare class Message<P = JsonValue> {
  private constructor();
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly timestamp: Date;
  readonly key: string;
  readonly payload: P;
  toJSON(): { topic: string; partition: number; offset: number; timestamp: string; key: string; payload: P };
}

/** A timer that came due. `time` has whole-second precision. */
export interface Timer {
  readonly key: string;
  readonly time: Date;
}

/** The attempt's context: cancellation and the key's timers. */
export declare class Context {
  private constructor();
  /** True once the attempt was asked to stop (timeout, rebalance, shutdown). */
  readonly shouldCancel: boolean;
  /** Resolves on cancellation, or once the handler has finished. */
  onCancel(): Promise<void>;
  schedule(time: Date): Promise<void>;
  clearAndSchedule(time: Date): Promise<void>;
  unschedule(time: Date): Promise<void>;
  clearScheduled(): Promise<void>;
  scheduled(): Promise<Date[]>;
  /**
   * The current key's handle of a registered collection for this attempt
   * (synchronous; one handle per definition object and attempt). The
   * definition's item type is the handle's. Throws `TransientStateError`
   * for anything but a definition made by the factories, and
   * `PermanentStateError` when the collection is not registered or is
   * registered with another kind or payload. Do not keep handles, or their
   * iterators, past the handler: their operations then reject transient.
   */
  state<T>(definition: ValueDefinition<T>): ValueState<T>;
  state<V>(definition: MapDefinition<V>): MapState<V>;
  state<T>(definition: DequeDefinition<T>): DequeState<T>;
  state<P>(definition: MessageValueDefinition<P>): ValueState<Message<P>>;
  state<P>(definition: MessageMapDefinition<P>): MapState<Message<P>>;
  state<P>(definition: MessageDequeDefinition<P>): DequeState<Message<P>>;
}

/**
 * Handles a subscription's events: a plain object or a class instance.
 * Both callbacks are optional; an event without one is acknowledged.
 *
 * `signal` aborts when the attempt is cancelled (timeout, rebalance,
 * shutdown). A callback that cannot reach its third argument (at most two
 * plain parameters, no `arguments` or `eval` in its source) is passed a
 * shared signal that never aborts, which saves creating one per event; it
 * still sees cancellation through `context.shouldCancel` and
 * `context.onCancel()`.
 */
export interface EventHandler<P = JsonValue> {
  onMessage?: (context: Context, message: Message<P>, signal: AbortSignal) => MaybePromise<void>;
  onTimer?: (context: Context, timer: Timer, signal: AbortSignal) => MaybePromise<void>;
}

// ---------------------------------------------------------------------------
// Clients

export declare class ProsodyClient {
  /** Builds a client; throws on an invalid configuration, naming the option. */
  constructor(config: Configuration);
  /** Equivalent to `new ProsodyClient(config)`. */
  static create(config: Configuration): Promise<ProsodyClient>;
  readonly sourceSystem: string;
  readonly consumerState: ConsumerState;
  readonly assignedPartitionCount: number;
  readonly isStalled: boolean;
  /**
   * Sends `payload` as JSON under `key` (any string, NUL included, arrives
   * exactly). Rejects with `TypeError` when topic or key is not a string,
   * `RangeError` (code `PROSODY_ERR_INVALID_ARGUMENT`) for a topic name Kafka
   * refuses, `TransientError` for a payload JSON cannot represent.
   */
  send<P>(topic: string, key: string, payload: P & JsonCompatible<P>, signal?: AbortSignal): Promise<void>;
  /**
   * Starts consuming. Misuse of the lifecycle (subscribing while subscribed)
   * rejects with a plain `Error` whose `code` is `PROSODY_ERR_STATE`, and
   * leaves the running subscription as it was.
   */
  subscribe<P = JsonValue>(eventHandler: EventHandler<P>): Promise<void>;
  /** Stops consuming; rejects with an `Error` (code `PROSODY_ERR_STATE`) when not subscribed. */
  unsubscribe(): Promise<void>;
  shutdown(): Promise<void>;
  /**
   * A read-only reader of the collection `definition` names that the
   * client of `subsystem` publishes (`published: true`). It sees committed
   * state only, through the read cache; every operation names the user
   * key. Works for JSON definitions (value, map, deque) only; anything else
   * rejects with `TypeError`.
   */
  state<T>(subsystem: string, definition: ValueDefinition<T>): Promise<PublishedValue<T>>;
  state<V>(subsystem: string, definition: MapDefinition<V>): Promise<PublishedMap<V>>;
  state<T>(subsystem: string, definition: DequeDefinition<T>): Promise<PublishedDeque<T>>;
}

/** Kafka security options, librdkafka's names in camelCase (README, Security). */
export interface KafkaSecurity {
  /** Any case; default "plaintext". */
  securityProtocol?: "plaintext" | "ssl" | "sasl_plaintext" | "sasl_ssl" | "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL";
  /** Required with a sasl_* protocol. */
  saslMechanism?: "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "OAUTHBEARER";
  saslUsername?: string;
  /** Never shown in errors or by util.inspect. */
  saslPassword?: string;
  /** OAUTHBEARER: a file holding the token, read at every authentication so that a renewed token is used. */
  saslOauthbearerTokenFile?: string;
  /** PEM CA bundle; unset trusts the system roots. */
  sslCaLocation?: string;
  /** Client certificate (PEM) for mutual TLS; needs sslKeyLocation. */
  sslCertificateLocation?: string;
  /** Unencrypted PEM private key of sslCertificateLocation. */
  sslKeyLocation?: string;
  /** The name the broker certificate must carry, when not the host dialled. */
  sslServerName?: string;
  /** `false` accepts any broker certificate: development only. */
  enableSslCertificateVerification?: boolean;
}

export declare class AdminClient {
  /** `options.mock` (an extension) uses the in-memory cluster of mock mode; the security options connect to a TLS/SASL cluster. */
  constructor(bootstrapServers: string | string[], options?: { mock?: boolean } & KafkaSecurity);
  createTopic(name: string, partitionCount: number, replicationFactor: number): Promise<void>;
  deleteTopic(name: string): Promise<void>;
  close(): void;
}

// ---------------------------------------------------------------------------
// Errors

export declare abstract class EventHandlerError extends Error {
  abstract get isPermanent(): boolean;
}
export declare class TransientError extends EventHandlerError {
  constructor(message?: string, options?: { cause?: unknown });
  get isPermanent(): false;
}
export declare class PermanentError extends EventHandlerError {
  constructor(message?: string, options?: { cause?: unknown });
  get isPermanent(): true;
}
export declare class TransientStateError extends TransientError {}
export declare class PermanentStateError extends PermanentError {}
export declare function isStateError(error: unknown): error is PermanentStateError | TransientStateError;

type ErrorClass = abstract new (...args: any[]) => unknown;
type Decorator = <F extends (...args: any[]) => any>(value: F, context?: ClassMethodDecoratorContext) => F;
/** Rethrows matching errors as PermanentError (TC39 decorator or function wrapper). */
export declare function permanent(...errors: ErrorClass[]): Decorator;
/** Rethrows matching errors as TransientError (TC39 decorator or function wrapper). */
export declare function transient(...errors: ErrorClass[]): Decorator;

// ---------------------------------------------------------------------------
// Logging and telemetry

export interface Logger {
  error(message: string, metadata?: Record<string, unknown>): void;
  warn(message: string, metadata?: Record<string, unknown>): void;
  info(message: string, metadata?: Record<string, unknown>): void;
  debug(message: string, metadata?: Record<string, unknown>): void;
  trace(message: string, metadata?: Record<string, unknown>): void;
}
export declare function initialize(): void;
export declare function setLogger(logger: Logger): void;
export declare function setLoggerIfUnset(logger: Logger): boolean;
export declare function loggerIsSet(): boolean;
export declare function getCurrentLogger(): Logger | null;
/**
 * Writes the telemetry events every client has queued for its telemetry
 * topic (clients of mock mode and with `telemetryEnabled: false` have
 * none); rejects when Kafka has not taken them within 30 s.
 */
export declare function flushTelemetry(): Promise<void>;
/** Flushes the telemetry events, as flushTelemetry. */
export declare function shutdownTelemetry(): Promise<void>;

// ---------------------------------------------------------------------------
// Keyed-state definitions

export interface StateDefinitionOptions {
  ttlSeconds?: number;
  readUncommitted?: boolean;
}
export interface PublishedStateDefinitionOptions extends StateDefinitionOptions {
  published?: boolean;
  readCache?: { ttlMs: number } | false;
}
export interface MapDefinitionOptions extends PublishedStateDefinitionOptions {
  keysetLimit?: number;
}
export interface DequeDefinitionOptions extends PublishedStateDefinitionOptions {
  capacity?: number;
}
export interface MessageMapDefinitionOptions extends StateDefinitionOptions {
  keysetLimit?: number;
}
export interface MessageDequeDefinitionOptions extends StateDefinitionOptions {
  capacity?: number;
}
export type ReadCacheOptions = { ttlMs: number } | false;

/** Types only: a definition's item type. Not exported, so only the factories make definitions. */
declare const stateItem: unique symbol;

interface Definition<K extends "value" | "map" | "deque", Pl extends "json" | "message", T> extends StateCollectionConfig {
  readonly name: string;
  readonly kind: K;
  readonly payload: Pl;
  /** Carries the item type; never present at runtime. */
  readonly [stateItem]: T;
}
export interface ValueDefinition<T = JsonValue> extends Definition<"value", "json", T> {}
export interface MapDefinition<V = JsonValue> extends Definition<"map", "json", V> {}
export interface DequeDefinition<T = JsonValue> extends Definition<"deque", "json", T> {}
export interface MessageValueDefinition<P = JsonValue> extends Definition<"value", "message", Message<P>> {}
export interface MessageMapDefinition<P = JsonValue> extends Definition<"map", "message", Message<P>> {}
export interface MessageDequeDefinition<P = JsonValue> extends Definition<"deque", "message", Message<P>> {}

export declare function value<T = JsonValue>(name: string, options?: PublishedStateDefinitionOptions): ValueDefinition<T>;
export declare function map<V = JsonValue>(name: string, options?: MapDefinitionOptions): MapDefinition<V>;
export declare function deque<T = JsonValue>(name: string, options?: DequeDefinitionOptions): DequeDefinition<T>;
export declare function messageValue<P = JsonValue>(name: string, options?: StateDefinitionOptions): MessageValueDefinition<P>;
export declare function messageMap<P = JsonValue>(name: string, options?: MessageMapDefinitionOptions): MessageMapDefinition<P>;
export declare function messageDeque<P = JsonValue>(name: string, options?: MessageDequeDefinitionOptions): MessageDequeDefinition<P>;

// ---------------------------------------------------------------------------
// Keyed-state handles (context.state). Every data operation returns a
// Promise; scans return an AsyncIterableIterator that reads in chunks and
// may be left early. null and undefined mean absence and cannot be stored
// (TransientStateError): use clear() or delete(). Caller mistakes (a bad
// key, index or direction) are TransientStateError too.

/** One value per key. */
export declare class ValueState<T = JsonValue> {
  private constructor();
  get(): Promise<T | null>;
  set(value: T): Promise<void>;
  clear(): Promise<void>;
  /** Writes this collection's pending changes now; they survive a later failure. */
  commit(): Promise<void>;
  /** Drops this collection's changes since its last commit(). */
  rollback(): Promise<void>;
}

/** An ordered map with string keys per key. */
export declare class MapState<V = JsonValue> {
  private constructor();
  get(key: string): Promise<V | null>;
  /** Positional: null for each absent key. */
  getMany(keys: readonly string[]): Promise<(V | null)[]>;
  has(key: string): Promise<boolean>;
  set(key: string, value: V): Promise<void>;
  delete(key: string): Promise<void>;
  clear(): Promise<void>;
  /** Throws TransientStateError at once for a direction other than "forward" or "backward". */
  entries(direction?: ScanDirection): AsyncIterableIterator<[string, V]>;
  keys(direction?: ScanDirection): AsyncIterableIterator<string>;
  values(direction?: ScanDirection): AsyncIterableIterator<V>;
  [Symbol.asyncIterator](): AsyncIterableIterator<[string, V]>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** A double-ended queue per key. */
export declare class DequeState<T = JsonValue> {
  private constructor();
  /** Appends at the back (a deque with a capacity drops its front item when full). */
  push(item: T): Promise<void>;
  /** Prepends at the front. */
  unshift(item: T): Promise<void>;
  /** Removes and returns the back item, or null when empty. */
  pop(): Promise<T | null>;
  /** Removes and returns the front item, or null when empty. */
  shift(): Promise<T | null>;
  length(): Promise<number>;
  isEmpty(): Promise<boolean>;
  clear(): Promise<void>;
  /**
   * The item at `index` (0 is the front, -1 the back, other negative
   * indices count from the back), or null. An index that is not a safe
   * integer rejects with TransientStateError.
   */
  at(index: number): Promise<T | null>;
  values(direction?: ScanDirection): AsyncIterableIterator<T>;
  [Symbol.asyncIterator](): AsyncIterableIterator<T>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

// ---------------------------------------------------------------------------
// Published readers (client.state): committed state of another subsystem's
// published JSON collection, through the read cache. The user key comes
// first.

export declare class PublishedValue<T = JsonValue> {
  private constructor();
  get(key: string): Promise<T | null>;
}

export declare class PublishedMap<V = JsonValue> {
  private constructor();
  get(key: string, mapKey: string): Promise<V | null>;
  getMany(key: string, mapKeys: readonly string[]): Promise<(V | null)[]>;
  has(key: string, mapKey: string): Promise<boolean>;
  entries(key: string, direction?: ScanDirection): AsyncIterableIterator<[string, V]>;
  keys(key: string, direction?: ScanDirection): AsyncIterableIterator<string>;
  values(key: string, direction?: ScanDirection): AsyncIterableIterator<V>;
}

export declare class PublishedDeque<T = JsonValue> {
  private constructor();
  length(key: string): Promise<number>;
  isEmpty(key: string): Promise<boolean>;
  at(key: string, index: number): Promise<T | null>;
  values(key: string, direction?: ScanDirection): AsyncIterableIterator<T>;
}
