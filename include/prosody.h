/*
 * prosody.h - the C ABI of Prosody, a Kafka client library with a Go core.
 *
 * This header is the contract. It is written by hand; a test
 * (tests/c/check_abi.sh) fails when it and the symbols exported by
 * libprosody.so disagree, and the library's own C shims include it, so the
 * compiler rejects any signature that differs.
 *
 * GENERAL RULES
 *
 * Handles. Every object (client, admin client, event) is an opaque
 * uint64_t handle. Handle ids are never reused within a process; 0 is never
 * a valid handle. Using a released, unknown or wrong-kind handle returns
 * PROSODY_ERR_INVALID_HANDLE and never crashes. Every handle has a release
 * call (an event is released by completing it).
 *
 * Status codes. Every function returning int returns a PROSODY_OK or a
 * PROSODY_ERR_* status. Functions taking `char **error_message` store a
 * library-owned, NUL-terminated UTF-8 description of the failure there when
 * they fail (and NULL when they succeed), unless error_message is NULL.
 * Free it with prosody_free().
 *
 * Memory. Every string or buffer the library hands out for the caller to
 * keep is allocated with malloc() and must be freed with prosody_free().
 * Event data (topic, key, payload, source system) is the exception: it is
 * borrowed, see prosody_event.
 *
 * Threading. Every function is thread-safe and may be called from any
 * thread. No function blocks on I/O: calls that talk to Kafka take a
 * completion callback and return at once; the rest only take short
 * internal locks. The Go runtime inside runs GOMAXPROCS = its default + 1
 * (a host thread that polls keeps one of its processors between calls),
 * and its default while every running subscription of the process uses
 * on_event, unless the GOMAXPROCS environment variable is set when the
 * library loads.
 * Callbacks (completion, notify, log) run on library-owned threads; they
 * must not block for long, and may call back into this API.
 *
 * Strings. Values a user chooses (topics, keys, payloads, trace headers)
 * cross as a pointer and a length, never as NUL-terminated strings: any
 * byte, NUL included, arrives exactly. Only texts the library or host
 * writes for people (error and failure messages, log records) and JSON
 * documents are NUL-terminated.
 *
 * Struct sizes. Every struct the host fills for the library, or that the
 * library fills for the host, starts with (or is passed with) its size, so
 * that a host built against an older header keeps working with a newer
 * library: the library reads only the fields that fit in the size the host
 * gave (later fields count as zero), and writes only the fields that fit in
 * the size the host has room for. New fields are only ever added at the
 * end. Set `size` to sizeof the struct as your header declares it.
 *
 * Fork. The Go runtime inside the library does not survive fork(). In a
 * child process every function returns PROSODY_ERR_AFTER_FORK ("used after
 * fork") immediately, without entering the Go runtime; prosody_free() and
 * prosody_status_name() keep working. Create clients in the process that
 * uses them (load the library after forking if you can).
 *
 * Signals. The library never calls signal.Notify and installs no handlers
 * beyond what the Go runtime needs for itself.
 */
#ifndef PROSODY_H
#define PROSODY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library version this header describes; prosody_version() reports the
 * version of the loaded library. */
#define PROSODY_VERSION "0.1.0"

/* ------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------ */

/* Success. */
#define PROSODY_OK 0
/* A NULL pointer, bad enum value or otherwise unusable argument. */
#define PROSODY_ERR_INVALID_ARGUMENT 1
/* The handle is unknown, released, or of another kind. */
#define PROSODY_ERR_INVALID_HANDLE 2
/* The configuration is invalid; the message names the option(s). */
#define PROSODY_ERR_CONFIG 3
/* The object is in the wrong state: already subscribed, not subscribed. */
#define PROSODY_ERR_STATE 4
/* The operation failed and may succeed if retried. */
#define PROSODY_ERR_TRANSIENT 5
/* The operation failed and will not succeed if retried. */
#define PROSODY_ERR_PERMANENT 6
/* The partition or client is going away; do not retry here. */
#define PROSODY_ERR_TERMINAL 7
/* The operation was cancelled or timed out. */
#define PROSODY_ERR_CANCELLED 8
/* The client was closed (released) while the operation ran. */
#define PROSODY_ERR_CLOSED 9
/* The library is used in a child process after fork(). */
#define PROSODY_ERR_AFTER_FORK 10
/* A bug in the library (a recovered panic); the message says more. */
#define PROSODY_ERR_INTERNAL 11
/* A write of JSON null to keyed state (absence cannot be stored): a kind of
 * TRANSIENT failure. */
#define PROSODY_ERR_NULL_VALUE 12

/* ------------------------------------------------------------------------
 * Enumerations
 * ------------------------------------------------------------------------ */

/* prosody_event.kind */
/* A consumed Kafka message. Complete it with prosody_event_complete. */
#define PROSODY_EVENT_MESSAGE 1
/* A due timer. Complete it with prosody_event_complete. */
#define PROSODY_EVENT_TIMER 2
/* A cancellation notice for an event the host received earlier and has not
 * completed: its handler should stop soon (partition revoked, shutdown).
 * The host must still complete that event; its outcome decides what
 * happens. Only `size`, `event` and `kind` are set; every other field is
 * zero or NULL. A notice can arrive after the host has already completed
 * the event: ignore notices for handles you no longer hold. */
#define PROSODY_EVENT_CANCELLED 3
/* The event's handler ran past the client's `timeout`. The library has
 * stopped waiting for it: the attempt counts as a transient failure (the
 * client's mode decides whether it is retried), its concurrency permit is
 * released and the key's next event may start. The host should stop the
 * handler now (cancel its task, abort its signal). The handle stays valid
 * for prosody_event_should_cancel (always 1), and the event's data stays
 * readable, until the host completes or releases the handle (or releases
 * the client); that completion's outcome is ignored. The notice reaches
 * the host before any later event of the same key, and timer operations
 * on the handle fail (no longer valid) from the moment the library gives
 * up, before the notice is queued. Only `size`, `event` and `kind` are
 * set. */
#define PROSODY_EVENT_EXPIRED 4

/* Outcomes for prosody_event_complete. */
/* The event is done and its offset may be committed. */
#define PROSODY_OUTCOME_OK 0
/* A transient failure: the client's mode decides (retry, defer, log). */
#define PROSODY_OUTCOME_TRANSIENT 1
/* A permanent failure: never retried (dead-lettered or logged and skipped). */
#define PROSODY_OUTCOME_PERMANENT 2
/* No verdict: the host is stopping this subscription and cannot handle the
 * event (its event loop is gone, say). The attempt ends without a retry
 * and the offset stays uncommitted, so the partition's next owner handles
 * the event again. Use it only after calling prosody_client_unsubscribe or
 * prosody_client_release: while the partition is still owned, an aborted
 * offset holds back its commits until it is revoked. */
#define PROSODY_OUTCOME_ABORT 3

/* prosody_client_consumer_state */
/* No consumer can run: no group_id or no subscribed_topics. */
#define PROSODY_CONSUMER_UNCONFIGURED 0
/* Ready to subscribe, or unsubscribed again. */
#define PROSODY_CONSUMER_CONFIGURED 1
/* Subscribed. */
#define PROSODY_CONSUMER_RUNNING 2

/* prosody_log_record.level */
#define PROSODY_LOG_DEBUG 1
#define PROSODY_LOG_INFO 2
#define PROSODY_LOG_WARN 3
#define PROSODY_LOG_ERROR 4

/* ------------------------------------------------------------------------
 * Callback types
 * ------------------------------------------------------------------------ */

/* Called exactly once, on a library thread, when an asynchronous operation
 * ends. status is PROSODY_OK or a PROSODY_ERR_* code; message describes a
 * failure (NULL on success) and is valid only during the call: copy it to
 * keep it. The host must not block in it for long. */
typedef void (*prosody_completion_fn)(void *user_data, int status, const char *message);

/* Completes prosody_event_scheduled: called exactly once, on a library
 * thread. On success (status PROSODY_OK) times_ms[0..count) are the
 * scheduled times in epoch milliseconds (whole seconds), earliest first;
 * times_ms is NULL when count is 0. On failure count is 0, times_ms NULL
 * and message describes the failure. The array and the message are valid
 * only during the call: copy them to keep them. */
typedef void (*prosody_times_fn)(void *user_data, int status, const int64_t *times_ms, size_t count,
                                 const char *message);

/* Called on a library thread when a subscription's ready queue goes from
 * empty to non-empty: once per wake-up, not once per event. The host should
 * then call prosody_client_poll until it returns fewer items than it asked
 * for. Keep it short (set a flag, write to a pipe, wake a loop): it runs on
 * the thread that delivers events. It can also run on the host's own
 * thread, inside prosody_event_complete, prosody_events_complete or
 * prosody_event_release (finishing an event can queue its key's next one),
 * so it must not wait for a lock the host holds around those calls. It may
 * call back into this API. Calls of one subscription's notify never
 * overlap or nest: a wake-up that comes during a call (from another thread,
 * or from events the call itself completes) makes it run once more after
 * it returns (calls of different subscriptions' callbacks can nest, when a
 * notify subscribes again). A new subscription's notify is also called
 * once at the start if items are already queued. It can find the queue
 * empty (a poll raced with it).
 * Unsubscribe and release complete only after every call of that
 * subscription's notify has returned, so user_data may be freed once they
 * complete; a notify must therefore never wait for them to complete. */
typedef void (*prosody_notify_fn)(void *user_data);

/* One log record. Every pointer is valid only during the callback. */
typedef struct prosody_log_record {
  size_t size;            /* sizeof the record the library filled: read no field beyond it */
  int32_t level;          /* PROSODY_LOG_* */
  int64_t time_ms;        /* when it was logged, epoch milliseconds */
  const char *target;     /* the logger name, "prosody" */
  const char *message;    /* the message */
  const char *attributes; /* key=value pairs (logfmt), may be "" */
} prosody_log_record;

/* Receives the library's log records (see prosody_set_log_callback). Runs
 * on library threads, possibly several at once; must not block for long. */
typedef void (*prosody_log_fn)(void *user_data, const prosody_log_record *record);

/* ------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------ */

/* One ready item delivered by prosody_client_poll (or passed to on_event).
 *
 * The byte ranges (topic, key, payload, source_system) point into ONE
 * library-owned allocation per event. They are borrowed: valid until the
 * event is completed (prosody_event_complete, prosody_events_complete) or
 * released (prosody_event_release), or its client is released, whichever
 * comes first. They are not NUL-terminated and may contain NUL bytes; use
 * the lengths. */
typedef struct prosody_event {
  size_t size;                  /* how many bytes of this struct the library filled */
  uint64_t event;               /* the event handle */
  int32_t kind;                 /* PROSODY_EVENT_* */
  int32_t partition;            /* Kafka partition */
  int64_t offset;               /* Kafka offset (messages; 0 for timers) */
  int64_t timestamp_ms;         /* record timestamp, epoch ms (messages) */
  int64_t time_ms;              /* when the timer was due, epoch ms (timers) */
  const char *topic;            /* topic name (UTF-8) */
  size_t topic_len;
  const char *key;              /* the record key (UTF-8) */
  size_t key_len;
  const uint8_t *payload;       /* the record value (JSON; messages) */
  size_t payload_len;
  const char *source_system;    /* source-system header, "" when absent */
  size_t source_system_len;
  /* The W3C trace context and baggage of the event: for a message its
   * record's headers (the first header of each name; "" when absent or not
   * UTF-8), for a timer those of the event whose handler scheduled it
   * (stored with the timer); always "" for notices. A host with
   * OpenTelemetry extracts a context from them and runs the handler in it,
   * so that the handler's spans continue the trace. */
  const char *traceparent;
  size_t traceparent_len;
  const char *tracestate;
  size_t tracestate_len;
  const char *baggage;
  size_t baggage_len;
} prosody_event;

/* A handler called directly by the library (prosody_handler_config's
 * on_event), on the library's own threads: one call per event, never two
 * at once for one key, calls for different keys concurrently (up to
 * max_concurrency). It returns the event's outcome (PROSODY_OUTCOME_*);
 * for TRANSIENT or PERMANENT it may store a NUL-terminated description in
 * *message, which the library copies as soon as the call returns (a string
 * literal or a thread-local buffer; not the callback's own stack). Any
 * other return value counts as TRANSIENT.
 *
 * The event and its bytes are valid during the call only. Its handle works
 * during the call for prosody_event_should_cancel and the timer operations
 * (they complete through their callbacks as usual, and only while the call
 * lasts: a callback that needs one done waits for its completion before
 * returning; an operation still queued when it returns fails);
 * prosody_event_complete and prosody_event_release refuse it (STATE): the
 * return value is the outcome. Cancellation notices are not delivered: a
 * long call polls prosody_event_should_cancel. The library cannot
 * interrupt a call; a slow one keeps its key waiting but not other keys
 * (the partition's intake moves to another thread). The call must not
 * unsubscribe or release its own client and wait for that to complete. */
typedef int32_t (*prosody_event_fn)(void *user_data, const prosody_event *event, const char **message);

/* The subscription's host side, given to prosody_client_subscribe. Zero it
 * before setting fields: later versions may add fields whose zero value
 * keeps today's behaviour. */
typedef struct prosody_handler_config {
  /* sizeof(prosody_handler_config) as the host's header declares it. */
  size_t size;
  /* Called once per wake-up of the ready queue; may be NULL when the host
   * watches the event fd (prosody_client_event_fd) instead. */
  prosody_notify_fn notify;
  /* Passed to notify and on_event. The host keeps it valid until the
   * unsubscribe completes (or the client is released). */
  void *user_data;
  /* NULL (the default): events are queued for prosody_client_poll, for
   * hosts that run handlers on threads of their own (an event loop). Set:
   * the library calls it for every message and timer instead, and nothing
   * is queued (notify and the event fd are not used for events). For C
   * hosts whose handlers may run on any thread: no queue, no wake-up and
   * no completion call per event, so it is the fastest way in. */
  prosody_event_fn on_event;
} prosody_handler_config;

/* The host's current trace context for prosody_client_send, in W3C wire
 * form. Each field is a pointer and a length; a NULL pointer or a zero
 * length means none. Zero it before setting fields. */
typedef struct prosody_trace_context {
  size_t size;              /* sizeof(prosody_trace_context) as the host's header declares it */
  const char *traceparent;  /* W3C traceparent of the host's current span */
  size_t traceparent_len;
  const char *tracestate;   /* W3C tracestate; used only with traceparent */
  size_t tracestate_len;
  const char *baggage;      /* W3C baggage */
  size_t baggage_len;
} prosody_trace_context;

/* One entry of a batch completion (prosody_events_complete, which takes
 * sizeof(prosody_completion) as the host's header declares it). */
typedef struct prosody_completion {
  uint64_t event;       /* the event handle */
  int32_t outcome;      /* PROSODY_OUTCOME_* */
  const char *message;  /* failure description (NUL-terminated UTF-8); may be NULL */
} prosody_completion;

/* ------------------------------------------------------------------------
 * Library
 * ------------------------------------------------------------------------ */

/* Stores the loaded library's version (a static string, never freed) in
 * *version. Errors: INVALID_ARGUMENT (version NULL), AFTER_FORK. */
int prosody_version(const char **version);

/* Frees memory the library handed out (error messages, strings). NULL is
 * ignored. Works after fork. Never pass event data or memory from another
 * allocator. */
void prosody_free(void *ptr);

/* A static, human-readable name for a status code ("PROSODY_ERR_CONFIG");
 * "PROSODY_ERR_UNKNOWN" for codes it does not know. Works after fork. */
const char *prosody_status_name(int status);

/* Sends every log record of every client (existing and future) to fn, with
 * user_data. fn NULL restores the default: text lines on stderr. Which
 * records are produced is still decided by each client's PROSODY_LOG
 * filter (default "info"). user_data must stay valid until another call
 * replaces it. Errors: AFTER_FORK. */
int prosody_set_log_callback(prosody_log_fn fn, void *user_data, char **error_message);

/* Stores in *schema_json the library's option schema, a malloc'd
 * NUL-terminated JSON document (free it with prosody_free): every option
 * prosody_client_new reads, with its JSON name, type, unit, default,
 * allowed range or values and environment variable, plus the options a
 * binding names differently or checks more strictly. Bindings build their
 * option tables and messages from it. The document describes itself:
 * {"version":1,"options":[{"name":...,"type":...,...}],...}. Errors:
 * INVALID_ARGUMENT, AFTER_FORK. */
int prosody_config_schema(char **schema_json, char **error_message);

/* Writes the telemetry events every client of the process has queued for
 * its telemetry topic, and exports the core's spans recorded so far (when
 * OTEL_EXPORTER_OTLP_ENDPOINT configured an exporter), then calls done
 * (required): OK once Kafka has
 * acknowledged or refused each of them, CANCELLED when timeout_ms (> 0)
 * passed first, TRANSIENT when an emitter has not reached Kafka yet (its
 * events stay queued). Clients without an emitter (telemetry_enabled off,
 * mock mode) have nothing to write. Errors returned at once:
 * INVALID_ARGUMENT (done NULL, timeout_ms not positive), AFTER_FORK. */
int prosody_flush_telemetry(int64_t timeout_ms, prosody_completion_fn done, void *user_data,
                            char **error_message);

/* Stores in *recording 1 when the core records spans of its own (an OTLP
 * exporter was set up from the OTEL_* variables when the process's first
 * client was made), else 0. Each event is then handed the trace context
 * of the core's receive or trigger span, which has applied message_spans
 * / timer_spans already: a host's own handler span is its child. Errors:
 * INVALID_ARGUMENT, AFTER_FORK. */
int prosody_tracing_recording(int *recording, char **error_message);

/* ------------------------------------------------------------------------
 * Client
 * ------------------------------------------------------------------------ */

/* Creates a client from one JSON object of snake_case options (e.g.
 * {"bootstrap_servers":"localhost:9094","group_id":"g",
 *  "subscribed_topics":"t","mock":true}); options not given come from the
 * PROSODY_* environment variables, then defaults. Does no network I/O
 * (the producer connects in the background). On success stores the new
 * handle in *client. Errors: INVALID_ARGUMENT (NULL arguments), CONFIG
 * (the message names each bad option). */
int prosody_client_new(const char *config_json, uint64_t *client, char **error_message);

/* Releases the client: the handle becomes invalid at once; the library
 * then, in the background, fails every uncompleted event of it (their
 * handles and data become invalid), waits for the subscribes and
 * unsubscribes called before it to complete (a subscribe not yet started
 * completes with CLOSED, and an unsubscribe of it then with STATE),
 * unsubscribes, flushes and closes the producer, closes the event fd, and
 * finally calls done (may be NULL), after every call of a notify callback
 * has returned and after the completions of the sends made before it. Stop
 * watching the event fd before calling this. Errors: INVALID_HANDLE
 * (including a second release), AFTER_FORK. */
int prosody_client_release(uint64_t client, prosody_completion_fn done, void *user_data,
                           char **error_message);

/* Sends payload (payload_len bytes of JSON) under key (key_len bytes of
 * UTF-8, any byte allowed) to topic (topic_len bytes; a name Kafka accepts:
 * 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', and not
 * "." or "..", else INVALID_ARGUMENT naming the topic). trace
 * (may be NULL) is the caller's current trace context: the record then
 * carries the headers baggage (when non-empty), traceparent and tracestate
 * (when traceparent is valid; tracestate even when empty), before
 * source-system. Records are handed to the producer in call order, so
 * sends made one after another without waiting for their completions are
 * written in that order (per partition). The arguments are copied before
 * it returns. done (required) is called once
 * the broker acknowledged the record (PROSODY_OK) or sending failed
 * (TRANSIENT, PERMANENT, TERMINAL, CANCELLED for send_timeout, CLOSED,
 * CONFIG when the client cannot send). Errors returned at once:
 * INVALID_ARGUMENT (a NULL pointer with a non-zero length, a key that is
 * not UTF-8, a topic name Kafka refuses), CONFIG (the client cannot
 * send), INVALID_HANDLE,
 * AFTER_FORK; done is then not called. */
int prosody_client_send(uint64_t client, const char *topic, size_t topic_len, const char *key,
                        size_t key_len, const uint8_t *payload, size_t payload_len,
                        const prosody_trace_context *trace, prosody_completion_fn done, void *user_data,
                        char **error_message);

/* Starts consuming. Ready events are queued for the host: the event fd
 * becomes readable and handler->notify (if set) is called, and the host
 * takes them with prosody_client_poll and finishes each with
 * prosody_event_complete; or, with handler->on_event set, each event is
 * handled by a direct call of it. The handler config is copied. done (required) is
 * called when the consumer started (OK) or could not (CLOSED: the client
 * was released first; otherwise the failure's status, e.g. TRANSIENT when
 * Kafka cannot be reached, with a message saying why).
 * A client's subscribes, unsubscribes and release take effect, and
 * complete, in the order they were called, each after the one before has
 * completed, so the host may subscribe again without waiting for an
 * unsubscribe's completion. Errors returned at once: INVALID_ARGUMENT,
 * INVALID_HANDLE, STATE (already subscribed), CONFIG (no consumer
 * configured), AFTER_FORK. */
int prosody_client_subscribe(uint64_t client, const prosody_handler_config *handler,
                             prosody_completion_fn done, void *user_data, char **error_message);

/* Stops consuming as a partition revocation does: events in flight get a
 * CANCELLED notice near the end of shutdown_timeout and must still be
 * completed by the host; final offsets are committed; then done (required)
 * is called (OK, or STATE when not subscribed). The client may subscribe
 * again afterwards. Errors returned at once: INVALID_ARGUMENT,
 * INVALID_HANDLE, AFTER_FORK. */
int prosody_client_unsubscribe(uint64_t client, prosody_completion_fn done, void *user_data,
                               char **error_message);

/* Stores in *fd the client's wake-up descriptor (non-blocking,
 * close-on-exec): an eventfd on Linux, the read end of a pipe elsewhere.
 * It is readable while the ready queue is non-empty and is reset by
 * prosody_client_poll when the queue becomes empty; it can also be readable
 * with nothing queued (after a race with a poll), and the next poll then
 * returns no items and resets it. The host only waits on it (never reads,
 * writes or closes it). It is the same fd for the client's
 * whole life, across subscriptions, and is closed when the release
 * completes. Errors: INVALID_ARGUMENT, INVALID_HANDLE, AFTER_FORK. */
int prosody_client_event_fd(uint64_t client, int *fd, char **error_message);

/* Moves up to capacity ready items (messages, timers, cancellation and
 * expiry notices) into out[0..*count) without blocking; *count is 0 when
 * none are ready. event_size is sizeof(prosody_event) as the host's header
 * declares it: out is an array of capacity items of that size, and the
 * library fills the fields that fit (setting each item's size). Items of
 * one key arrive in order. Call again while *count == capacity. Errors:
 * INVALID_ARGUMENT (out or count NULL with capacity > 0, an event_size
 * smaller than the first version of prosody_event), INVALID_HANDLE,
 * AFTER_FORK. */
int prosody_client_poll(uint64_t client, prosody_event *out, size_t capacity, size_t event_size,
                        size_t *count, char **error_message);

/* Stores PROSODY_CONSUMER_* in *state. Errors: CONFIG when the consumer
 * configuration is invalid (the message says why), INVALID_ARGUMENT,
 * INVALID_HANDLE, AFTER_FORK. */
int prosody_client_consumer_state(uint64_t client, int *state, char **error_message);

/* Stores in *source_system the value of the source-system header this
 * client puts on sent records (source_system, or else group_id), as a
 * malloc'd NUL-terminated string: free it with prosody_free. Errors:
 * INVALID_ARGUMENT, INVALID_HANDLE, AFTER_FORK. */
int prosody_client_source_system(uint64_t client, char **source_system, char **error_message);

/* Stores the number of partitions the consumer owns (0 unless subscribed).
 * Errors: INVALID_ARGUMENT, INVALID_HANDLE, AFTER_FORK. */
int prosody_client_assigned_partition_count(uint64_t client, uint32_t *count, char **error_message);

/* Stores 1 in *stalled when a partition made no progress for
 * stall_threshold, else 0 (always 0 unless subscribed). Errors:
 * INVALID_ARGUMENT, INVALID_HANDLE, AFTER_FORK. */
int prosody_client_is_stalled(uint64_t client, int *stalled, char **error_message);

/* ------------------------------------------------------------------------
 * Events
 *
 * An event handle comes from prosody_client_poll (MESSAGE or TIMER items)
 * and stays valid until the event is completed or released, or its client
 * is released. The library's handler for that event waits until then.
 * ------------------------------------------------------------------------ */

/* Finishes an event with an outcome (PROSODY_OUTCOME_*) and, for failures,
 * a message (may be NULL; copied). OK lets its offset be committed;
 * TRANSIENT and PERMANENT are handled by the client's mode. The handle and
 * the event's data become invalid. For an event the library gave up on
 * (PROSODY_EVENT_EXPIRED) the outcome is ignored and only its data is
 * freed. Errors: INVALID_ARGUMENT (bad outcome;
 * the event stays pending), INVALID_HANDLE (unknown, not yet returned by
 * a poll, or already completed), AFTER_FORK. */
int prosody_event_complete(uint64_t event, int outcome, const char *message, char **error_message);

/* Completes n events in one call, as prosody_event_complete does for each.
 * items is an array of n entries of item_size bytes each
 * (sizeof(prosody_completion) as the host's header declares it). Every
 * valid item is completed even when others fail; the status and message
 * are those of the first failing item (the message gives its index).
 * Errors: INVALID_ARGUMENT (items NULL with n > 0, bad outcome, an
 * item_size smaller than the first version of prosody_completion),
 * INVALID_HANDLE, AFTER_FORK. */
int prosody_events_complete(const prosody_completion *items, size_t n, size_t item_size,
                            char **error_message);

/* Stores 1 in *cancelled when the event's handler has been asked to stop
 * (timeout, revocation, shutdown), else 0. The host can also wait for the
 * CANCELLED notice delivered by prosody_client_poll. Errors:
 * INVALID_ARGUMENT, INVALID_HANDLE, AFTER_FORK. */
int prosody_event_should_cancel(uint64_t event, int *cancelled, char **error_message);

/* Gives an event up without handling it: it is completed as TRANSIENT
 * ("released without completion"), so the client's mode retries it. The
 * handle and data become invalid. Errors: INVALID_HANDLE, AFTER_FORK. */
int prosody_event_release(uint64_t event, char **error_message);

/* Timer operations.
 *
 * A MESSAGE or TIMER event can schedule durable timers for its own key
 * (the event's key, on its partition). When a timer is due, the client
 * delivers a TIMER event for that key through prosody_client_poll (time_ms
 * is the time it was scheduled for, offset and payload are empty); a timer
 * event can schedule further timers in turn. Timers are stored in
 * Cassandra (cassandra_nodes, cassandra_keyspace), or in memory in mock
 * mode; they survive restarts and rebalances, and run in order with the
 * key's messages.
 *
 * Times are epoch milliseconds with whole-second precision: a time rounds
 * to the nearest second (half a second rounds up). A time in the past fires
 * as soon as possible. Timers are stored as unsigned 32-bit seconds, so a
 * time must lie within 1970-01-01T00:00:00Z..2106-02-07T06:28:15Z (after
 * rounding); any other is refused at once with INVALID_ARGUMENT.
 *
 * Each operation returns at once and never blocks: it checks its arguments
 * and the event handle, then runs in the background and calls cb exactly
 * once, on a library thread, with the outcome. The operations of one event
 * run, and call their callbacks, in the order they were called, so a host
 * need not wait for one before calling the next. Complete the event only
 * after the callbacks of its timer operations ran: an operation still
 * running when the event is completed fails (PERMANENT, "no longer valid")
 * and may or may not have taken effect.
 *
 * Errors returned at once (cb is then not called): INVALID_ARGUMENT (cb
 * NULL, a time out of range), INVALID_HANDLE (unknown, completed or released event, or a
 * handle of another kind), AFTER_FORK.
 *
 * Statuses passed to cb: OK; PERMANENT when the event was completed
 * meanwhile ("the context is no longer valid") or the client has no timers;
 * TERMINAL when the partition is being revoked or the consumer stops (do
 * not retry; complete the event); TRANSIENT when the event timed out or the
 * timer store failed (the operation may succeed if retried). */

/* Schedules a timer for the event's key at time_ms. A key may have many
 * timers; scheduling an existing time again has no further effect. */
int prosody_event_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                           char **error_message);

/* Replaces every timer of the event's key with one at time_ms. */
int prosody_event_clear_and_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb,
                                     void *user_data, char **error_message);

/* Removes the event's key's timer at time_ms (rounded to the second); a
 * time with no timer is not an error. */
int prosody_event_unschedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                             char **error_message);

/* Removes every timer of the event's key. */
int prosody_event_clear_scheduled(uint64_t event, prosody_completion_fn cb, void *user_data,
                                  char **error_message);

/* Lists the event's key's pending timers, earliest first, through cb (see
 * prosody_times_fn). The timer being handled (for a TIMER event) is not
 * listed unless it was scheduled again. */
int prosody_event_scheduled(uint64_t event, prosody_times_fn cb, void *user_data, char **error_message);

/* ------------------------------------------------------------------------
 * Keyed state
 * ------------------------------------------------------------------------
 *
 * A MESSAGE or TIMER event can read and write the keyed state of its own
 * key: the collections registered with the client's state_collections
 * option (each a value, a map with string keys, or a deque; of JSON or of
 * message items). Writes are staged in the event's attempt and seen by its
 * own reads; they are committed when the host completes the event with
 * PROSODY_OUTCOME_OK, and discarded on any other outcome (unless a
 * collection was committed early with PROSODY_STATE_COMMIT, or is
 * read_uncommitted). See the client documentation for the guarantees.
 *
 * Items cross as bytes: for a JSON collection, JSON text (JSON null cannot
 * be stored: PROSODY_ERR_NULL_VALUE); for a message collection, a JSON
 * object {"topic", "partition", "offset", "key", "timestamp" (epoch ms),
 * "payload"} describing a Kafka message.
 *
 * prosody_event_state opens a collection for the event and returns a state
 * handle. Operations on it (prosody_state_call, prosody_state_scan and the
 * cursor functions) check their arguments at once, then run in the
 * background and report through a prosody_state_fn exactly once, on a
 * library thread. The operations of one state handle run, and report, in
 * the order they were called. Once the event is completed, operations on
 * its state handles and cursors report PROSODY_ERR_TRANSIENT ("no longer
 * valid") and change nothing; the handles stay valid as handles until
 * released. Release every state handle and cursor the host opened
 * (prosody_state_release, prosody_cursor_release); releasing the client
 * releases them too.
 *
 * Statuses reported: OK; TRANSIENT (the store failed, an item is not what
 * the collection stores, the handle outlived its event, or the event timed
 * out: the event may succeed if retried); NULL_VALUE (a write of JSON null;
 * a kind of TRANSIENT); PERMANENT (the collection is not registered, or is
 * registered with another kind); TERMINAL (the partition is being revoked
 * or the consumer stops: complete the event). */

/* Collection kinds (prosody_event_state). */
#define PROSODY_STATE_VALUE 1
#define PROSODY_STATE_MAP 2
#define PROSODY_STATE_DEQUE 3

/* Scan directions. */
#define PROSODY_STATE_FORWARD 0
#define PROSODY_STATE_BACKWARD 1

/* Operations (prosody_state_call). "V", "M" and "D" say which kinds take
 * each; the result is reported as described under prosody_state_fn:
 *   items: the items reported (n of them), number: the number reported. */
#define PROSODY_STATE_GET 1        /* V: the value. M (key): the entry. D (index): the item. n = 0 when absent, else 1 */
#define PROSODY_STATE_SET 2        /* V (value), M (key, value): stage a write. n = 0 */
#define PROSODY_STATE_CLEAR 3      /* V, M, D: stage removing everything. n = 0 */
#define PROSODY_STATE_COMMIT 4     /* V, M, D: write this collection's staged changes now. n = 0 */
#define PROSODY_STATE_ROLLBACK 5   /* V, M, D: drop this collection's changes since its last commit. n = 0 */
#define PROSODY_STATE_CONTAINS 6   /* M (key): number = 1 if the entry exists, else 0 */
#define PROSODY_STATE_GET_MANY 7   /* M (keys): n = keys_len items, item i for keys[i], value NULL when absent */
#define PROSODY_STATE_REMOVE 8     /* M (key): stage removing the entry. n = 0 */
#define PROSODY_STATE_PUSH_BACK 9  /* D (value). n = 0 */
#define PROSODY_STATE_PUSH_FRONT 10 /* D (value). n = 0 */
#define PROSODY_STATE_POP_BACK 11  /* D: the item removed; n = 0 when empty */
#define PROSODY_STATE_POP_FRONT 12 /* D */
#define PROSODY_STATE_PEEK_BACK 13 /* D: the item, not removed; n = 0 when empty */
#define PROSODY_STATE_PEEK_FRONT 14 /* D */
#define PROSODY_STATE_LEN 15       /* D: number = the number of items */
#define PROSODY_STATE_IS_EMPTY 16  /* D: number = 1 when empty, else 0 */

/* One item: a map entry (key, value) or a value or deque item (value; key
 * NULL). In the arguments of PROSODY_STATE_GET_MANY only the key fields are
 * read. A NULL value with value_len 0 means absent. */
typedef struct prosody_state_item {
  const char *key;
  size_t key_len;
  const uint8_t *value;
  size_t value_len;
} prosody_state_item;

/* The arguments of prosody_state_call; zero it, then set `size` and what
 * the operation takes. */
typedef struct prosody_state_args {
  size_t size;                    /* sizeof(prosody_state_args) as the host's header declares it */
  const char *key;                /* a map key (UTF-8) */
  size_t key_len;
  const uint8_t *value;           /* an item to write */
  size_t value_len;
  const prosody_state_item *keys; /* PROSODY_STATE_GET_MANY: the keys */
  size_t keys_len;
  uint64_t index;                 /* PROSODY_STATE_GET on a deque: 0 is the front */
} prosody_state_args;

/* Reports a state operation or a cursor's chunk: called exactly once, on a
 * library thread. On success status is PROSODY_OK and items[0..n) and
 * number hold the result (items NULL when n is 0); on failure n and number
 * are 0 and message describes it. Items and message are valid only during
 * the call: copy them to keep them. */
typedef void (*prosody_state_fn)(void *user_data, int status, const prosody_state_item *items, size_t n,
                                 uint64_t number, const char *message);

/* Opens the collection `name` (UTF-8, name_len bytes) of `kind`
 * (PROSODY_STATE_*) for the event's key and attempt, storing a state handle
 * in *state. An event whose attempt has ended or been cancelled meanwhile
 * (timed out, its partition revoked) still gets a handle; its operations
 * report why (TRANSIENT, TERMINAL). Errors: INVALID_ARGUMENT (state NULL,
 * a bad kind, name NULL with name_len > 0),
 * INVALID_HANDLE (unknown, completed or released event), PERMANENT (not
 * registered, or registered with another kind or a disagreeing durable
 * schema; the message says which), STATE (the client has no keyed state),
 * AFTER_FORK. */
int prosody_event_state(uint64_t event, const char *name, size_t name_len, int kind, uint64_t *state,
                        char **error_message);

/* Runs operation `op` (PROSODY_STATE_*) on a state handle; reports through
 * cb. The arguments are copied before it returns. A map key is any UTF-8
 * (the empty key too); a key or value pointer NULL means it is missing.
 * Errors returned at once (cb is then not called): INVALID_ARGUMENT (cb
 * or args NULL, args->size too small, an operation the kind does not
 * take, a missing key or value, a key that is not UTF-8), INVALID_HANDLE,
 * AFTER_FORK. */
int prosody_state_call(uint64_t state, int op, const prosody_state_args *args, prosody_state_fn cb,
                       void *user_data, char **error_message);

/* Opens a scan of a map or deque (direction PROSODY_STATE_FORWARD or
 * _BACKWARD; keys_only != 0 leaves map values out) and stores a cursor
 * handle in *cursor. The scan sees the attempt's own writes; chunks are
 * ordered and distinct across their boundaries. Errors: INVALID_ARGUMENT
 * (cursor NULL, a bad direction: the message names "forward" and
 * "backward", a value collection), INVALID_HANDLE, AFTER_FORK. */
int prosody_state_scan(uint64_t state, int direction, int keys_only, uint64_t *cursor, char **error_message);

/* Reports the cursor's next chunk of at most 256 items through cb; n = 0
 * once the scan is over. Calls on one cursor report in order. Errors
 * returned at once: INVALID_ARGUMENT (cb NULL), INVALID_HANDLE,
 * AFTER_FORK. */
int prosody_cursor_next(uint64_t cursor, prosody_state_fn cb, void *user_data, char **error_message);

/* Releases a cursor; a chunk still being read is reported first. Errors:
 * INVALID_HANDLE, AFTER_FORK. */
int prosody_cursor_release(uint64_t cursor, char **error_message);

/* Releases a state handle (its cursors stay usable until released).
 * Errors: INVALID_HANDLE, AFTER_FORK. */
int prosody_state_release(uint64_t state, char **error_message);

/* Published state readers.
 *
 * A collection registered with "published": true by a client with a
 * `subsystem` can be read by any client (one with no consumer included)
 * through a reader: it sees committed state only, never an attempt's
 * staged writes, served through a read cache (state_read_cache_ttl, 5 s by
 * default, or the per-reader ttl). Every operation names the user key. */

/* Opens a reader of the collection `name` of `kind` that `subsystem`
 * publishes, storing a reader handle in *reader. cache_ttl_ms < 0 uses
 * the client's state_read_cache_ttl, 0 disables the cache for this reader,
 * > 0 is the cache window in milliseconds. The routing record is read by
 * the first operation (which fails PERMANENT when the subsystem does not
 * publish the collection, or publishes another kind); outside mock mode the
 * client's first reader also connects to Cassandra then (TRANSIENT when it
 * cannot). Errors: INVALID_ARGUMENT (reader NULL, subsystem or name empty,
 * a bad kind), INVALID_HANDLE (client), AFTER_FORK. */
int prosody_client_reader(uint64_t client, const char *subsystem, size_t subsystem_len, const char *name,
                          size_t name_len, int kind, int64_t cache_ttl_ms, uint64_t *reader,
                          char **error_message);

/* Runs a read (PROSODY_STATE_GET, _CONTAINS, _GET_MANY, _LEN, _IS_EMPTY,
 * _PEEK_FRONT, _PEEK_BACK) of user key `key` (UTF-8; NULL is refused)
 * through a reader; reports as prosody_state_call. Unlike a state
 * handle's, a reader's reads run concurrently and may report in any order;
 * a read still running when the client is released may fail with CLOSED.
 * Errors returned at once: as prosody_state_call (an operation that is not
 * a read is INVALID_ARGUMENT). */
int prosody_reader_call(uint64_t reader, const char *key, size_t key_len, int op, const prosody_state_args *args,
                        prosody_state_fn cb, void *user_data, char **error_message);

/* Opens a scan of user key `key`'s map or deque through a reader; as
 * prosody_state_scan (the cursor's chunks report in order). */
int prosody_reader_scan(uint64_t reader, const char *key, size_t key_len, int direction, int keys_only,
                        uint64_t *cursor, char **error_message);

/* Releases a reader (its reads still running report; its cursors stay
 * usable until released). Errors: INVALID_HANDLE, AFTER_FORK. */
int prosody_reader_release(uint64_t reader, char **error_message);

/* ------------------------------------------------------------------------
 * Admin client
 * ------------------------------------------------------------------------ */

/* Creates an admin client from a JSON configuration with the client's
 * option names (bootstrap_servers and mock are used). Returns at once: the
 * connection is made in the background, and a connection failure is
 * reported by the first operations' completions. Errors: INVALID_ARGUMENT,
 * CONFIG (names the option), AFTER_FORK. */
int prosody_admin_new(const char *config_json, uint64_t *admin, char **error_message);

/* Creates a topic described by a JSON object with the keys name (required),
 * partition_count, replication_factor, cleanup_policy and retention (e.g.
 * "7d"); absent keys fall back to PROSODY_TOPIC_* variables, then the
 * broker. An existing topic is not an error. done (required) is called once
 * the topic is usable or creating it failed. Errors returned at once:
 * INVALID_ARGUMENT, INVALID_HANDLE, CONFIG (names the option, or the topic
 * name Kafka refuses), AFTER_FORK. */
int prosody_admin_create_topic(uint64_t admin, const char *topic_json, prosody_completion_fn done,
                               void *user_data, char **error_message);

/* Deletes the topic named by name (name_len bytes); done (required) is
 * called when that is done or failed. Errors returned at once:
 * INVALID_ARGUMENT (also for a name Kafka refuses, see prosody_client_send),
 * INVALID_HANDLE, AFTER_FORK. */
int prosody_admin_delete_topic(uint64_t admin, const char *name, size_t name_len, prosody_completion_fn done,
                               void *user_data, char **error_message);

/* Releases the admin client: the handle becomes invalid at once; running
 * operations are aborted (their completions report the failure) and the
 * connections closed in the background. Errors: INVALID_HANDLE,
 * AFTER_FORK. */
int prosody_admin_release(uint64_t admin, char **error_message);

#ifdef __cplusplus
}
#endif

#endif /* PROSODY_H */
