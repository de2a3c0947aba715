/*
 * shims.c - the public entry points of libprosody.
 *
 * Every prosody_* function is defined here, in C, and checks for a fork
 * before it enters the Go runtime: a forked child has none of the parent's
 * runtime threads, so calling any Go export there can hang forever. Only
 * then does it call the Go implementation (prosodyGo_*, hidden from the
 * library's dynamic symbol table by exports.map). It also clears
 * *error_message first, so the Go side only ever sets it on failure.
 *
 * The trampolines at the end let Go call the host's function pointers.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

#include "shims.h"
#include "_cgo_export.h"

/* Every public function defined here must be declared in prosody.h. */
#pragma GCC diagnostic error "-Wmissing-prototypes"

/* Set in the child by the pthread_atfork handler. A plain flag rather than
 * getpid() on every call: it costs one load, and getpid() is a system call
 * in current glibc. */
static volatile int prosody_forked;

static void prosody_on_fork_child(void) { prosody_forked = 1; }

__attribute__((constructor)) static void prosody_shims_init(void) {
  pthread_atfork(NULL, NULL, prosody_on_fork_child);
}

static int prosody_after_fork(char **error_message) {
  if (error_message != NULL) {
    *error_message = strdup("used after fork: the prosody library cannot be used in a child process "
                            "created by fork(); create clients in the process that uses them");
  }
  return PROSODY_ERR_AFTER_FORK;
}

#define PROSODY_ENTER(error_message)                                                               \
  do {                                                                                             \
    if (error_message != NULL) *(error_message) = NULL;                                            \
    if (prosody_forked) return prosody_after_fork(error_message);                                  \
  } while (0)

/* ---- library ---- */

int prosody_version(const char **version) {
  if (prosody_forked) return PROSODY_ERR_AFTER_FORK;
  return prosodyGo_version((char **)version);
}

void prosody_free(void *ptr) { free(ptr); }

const char *prosody_status_name(int status) {
  switch (status) {
  case PROSODY_OK: return "PROSODY_OK";
  case PROSODY_ERR_INVALID_ARGUMENT: return "PROSODY_ERR_INVALID_ARGUMENT";
  case PROSODY_ERR_INVALID_HANDLE: return "PROSODY_ERR_INVALID_HANDLE";
  case PROSODY_ERR_CONFIG: return "PROSODY_ERR_CONFIG";
  case PROSODY_ERR_STATE: return "PROSODY_ERR_STATE";
  case PROSODY_ERR_TRANSIENT: return "PROSODY_ERR_TRANSIENT";
  case PROSODY_ERR_PERMANENT: return "PROSODY_ERR_PERMANENT";
  case PROSODY_ERR_TERMINAL: return "PROSODY_ERR_TERMINAL";
  case PROSODY_ERR_CANCELLED: return "PROSODY_ERR_CANCELLED";
  case PROSODY_ERR_CLOSED: return "PROSODY_ERR_CLOSED";
  case PROSODY_ERR_AFTER_FORK: return "PROSODY_ERR_AFTER_FORK";
  case PROSODY_ERR_INTERNAL: return "PROSODY_ERR_INTERNAL";
  case PROSODY_ERR_NULL_VALUE: return "PROSODY_ERR_NULL_VALUE";
  }
  return "PROSODY_ERR_UNKNOWN";
}

int prosody_set_log_callback(prosody_log_fn fn, void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_set_log_callback(fn, (uintptr_t)user_data, error_message);
}

int prosody_config_schema(char **schema_json, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_config_schema(schema_json, error_message);
}

int prosody_flush_telemetry(int64_t timeout_ms, prosody_completion_fn done, void *user_data,
                            char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_flush_telemetry(timeout_ms, done, (uintptr_t)user_data, error_message);
}

int prosody_tracing_recording(int *recording, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_tracing_recording(recording, error_message);
}

/* ---- client ---- */

int prosody_client_new(const char *config_json, uint64_t *client, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_new((char *)config_json, client, error_message);
}

int prosody_client_release(uint64_t client, prosody_completion_fn done, void *user_data,
                           char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_release(client, done, (uintptr_t)user_data, error_message);
}

int prosody_client_send(uint64_t client, const char *topic, size_t topic_len, const char *key,
                        size_t key_len, const uint8_t *payload, size_t payload_len,
                        const prosody_trace_context *trace, prosody_completion_fn done, void *user_data,
                        char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_send(client, (char *)topic, topic_len, (char *)key, key_len, (uint8_t *)payload,
                               payload_len, (prosody_trace_context *)trace, done, (uintptr_t)user_data,
                               error_message);
}

int prosody_client_subscribe(uint64_t client, const prosody_handler_config *handler,
                             prosody_completion_fn done, void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_subscribe(client, (prosody_handler_config *)handler, done, (uintptr_t)user_data,
                                    error_message);
}

int prosody_client_unsubscribe(uint64_t client, prosody_completion_fn done, void *user_data,
                               char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_unsubscribe(client, done, (uintptr_t)user_data, error_message);
}

int prosody_client_event_fd(uint64_t client, int *fd, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_event_fd(client, fd, error_message);
}

int prosody_client_poll(uint64_t client, prosody_event *out, size_t capacity, size_t event_size,
                        size_t *count, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_poll(client, out, capacity, event_size, count, error_message);
}

int prosody_client_consumer_state(uint64_t client, int *state, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_consumer_state(client, state, error_message);
}

int prosody_client_source_system(uint64_t client, char **source_system, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_source_system(client, source_system, error_message);
}

int prosody_client_assigned_partition_count(uint64_t client, uint32_t *count, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_assigned_partition_count(client, count, error_message);
}

int prosody_client_is_stalled(uint64_t client, int *stalled, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_is_stalled(client, stalled, error_message);
}

/* ---- events ---- */

int prosody_event_complete(uint64_t event, int outcome, const char *message, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_complete(event, outcome, (char *)message, error_message);
}

int prosody_events_complete(const prosody_completion *items, size_t n, size_t item_size,
                            char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_events_complete((prosody_completion *)items, n, item_size, error_message);
}

int prosody_event_should_cancel(uint64_t event, int *cancelled, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_should_cancel(event, cancelled, error_message);
}

int prosody_event_release(uint64_t event, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_release(event, error_message);
}

int prosody_event_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                           char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_schedule(event, time_ms, cb, (uintptr_t)user_data, error_message);
}

int prosody_event_clear_and_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb,
                                     void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_clear_and_schedule(event, time_ms, cb, (uintptr_t)user_data, error_message);
}

int prosody_event_unschedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                             char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_unschedule(event, time_ms, cb, (uintptr_t)user_data, error_message);
}

int prosody_event_clear_scheduled(uint64_t event, prosody_completion_fn cb, void *user_data,
                                  char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_clear_scheduled(event, cb, (uintptr_t)user_data, error_message);
}

int prosody_event_scheduled(uint64_t event, prosody_times_fn cb, void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_scheduled(event, cb, (uintptr_t)user_data, error_message);
}

/* ---- keyed state ---- */

int prosody_event_state(uint64_t event, const char *name, size_t name_len, int kind, uint64_t *state,
                        char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_event_state(event, (char *)name, name_len, kind, state, error_message);
}

int prosody_state_call(uint64_t state, int op, const prosody_state_args *args, prosody_state_fn cb,
                       void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_state_call(state, op, (prosody_state_args *)args, cb, (uintptr_t)user_data, error_message);
}

int prosody_state_scan(uint64_t state, int direction, int keys_only, uint64_t *cursor, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_state_scan(state, direction, keys_only, cursor, error_message);
}

int prosody_cursor_next(uint64_t cursor, prosody_state_fn cb, void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_cursor_next(cursor, cb, (uintptr_t)user_data, error_message);
}

int prosody_cursor_release(uint64_t cursor, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_cursor_release(cursor, error_message);
}

int prosody_state_release(uint64_t state, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_state_release(state, error_message);
}

int prosody_client_reader(uint64_t client, const char *subsystem, size_t subsystem_len, const char *name,
                          size_t name_len, int kind, int64_t cache_ttl_ms, uint64_t *reader,
                          char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_client_reader(client, (char *)subsystem, subsystem_len, (char *)name, name_len, kind,
                                 cache_ttl_ms, reader, error_message);
}

int prosody_reader_call(uint64_t reader, const char *key, size_t key_len, int op, const prosody_state_args *args,
                        prosody_state_fn cb, void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_reader_call(reader, (char *)key, key_len, op, (prosody_state_args *)args, cb,
                               (uintptr_t)user_data, error_message);
}

int prosody_reader_scan(uint64_t reader, const char *key, size_t key_len, int direction, int keys_only,
                        uint64_t *cursor, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_reader_scan(reader, (char *)key, key_len, direction, keys_only, cursor, error_message);
}

int prosody_reader_release(uint64_t reader, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_reader_release(reader, error_message);
}

/* ---- admin ---- */

int prosody_admin_new(const char *config_json, uint64_t *admin, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_admin_new((char *)config_json, admin, error_message);
}

int prosody_admin_create_topic(uint64_t admin, const char *topic_json, prosody_completion_fn done,
                               void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_admin_create_topic(admin, (char *)topic_json, done, (uintptr_t)user_data, error_message);
}

int prosody_admin_delete_topic(uint64_t admin, const char *name, size_t name_len, prosody_completion_fn done,
                               void *user_data, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_admin_delete_topic(admin, (char *)name, name_len, done, (uintptr_t)user_data, error_message);
}

int prosody_admin_release(uint64_t admin, char **error_message) {
  PROSODY_ENTER(error_message);
  return prosodyGo_admin_release(admin, error_message);
}

/* ---- trampolines ---- */

void prosodyInt_call_completion(prosody_completion_fn fn, uintptr_t user_data, int status,
                                const char *message) {
  fn((void *)user_data, status, message);
}

void prosodyInt_call_times(prosody_times_fn fn, uintptr_t user_data, int status, const int64_t *times_ms,
                           size_t count, const char *message) {
  fn((void *)user_data, status, times_ms, count, message);
}

void prosodyInt_call_state(prosody_state_fn fn, uintptr_t user_data, int status, const prosody_state_item *items,
                           size_t n, uint64_t number, const char *message) {
  fn((void *)user_data, status, items, n, number, message);
}

void prosodyInt_call_notify(prosody_notify_fn fn, uintptr_t user_data) { fn((void *)user_data); }

int32_t prosodyInt_call_event(uintptr_t fn, uintptr_t user_data, uintptr_t frame) {
  prosodyInt_call_frame *f = (prosodyInt_call_frame *)frame;
  return ((prosody_event_fn)fn)((void *)user_data, &f->view, &f->message);
}

void prosodyInt_call_log(prosody_log_fn fn, uintptr_t user_data, int32_t level, int64_t time_ms,
                         const char *target, const char *message, const char *attributes) {
  prosody_log_record r = {sizeof r, level, time_ms, target, message, attributes};
  fn((void *)user_data, &r);
}

#ifdef __linux__
int prosodyInt_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
#endif

extern char **environ;

/* The PROSODY_* entries of the process environment as the C library sees
 * it now, "NAME=value" strings joined with '\n' in one malloc'd buffer
 * (NULL when there are none). See env.go. */
/* The variables the core reads: its own and OpenTelemetry's. */
static int prosody_env_var(const char *e) { return strncmp(e, "PROSODY_", 8) == 0 || strncmp(e, "OTEL_", 5) == 0; }

char *prosodyInt_prosody_env(void) {
  size_t size = 0;
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (prosody_env_var(*e)) size += strlen(*e) + 1;
  }
  if (size == 0) return NULL;
  char *out = malloc(size + 1), *p = out;
  if (out == NULL) return NULL;
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (!prosody_env_var(*e)) continue;
    size_t n = strlen(*e);
    memcpy(p, *e, n);
    p[n] = '\n';
    p += n + 1;
  }
  *p = '\0';
  return out;
}

uintptr_t prosodyInt_handler_user_data(const prosody_handler_config *h) { return (uintptr_t)h->user_data; }
