"""cffi build script for ``prosody._prosody_cffi`` (API, out-of-line mode).

The declarations below mirror include/prosody.h. The extension is compiled
with the real header included, so the C compiler rejects any declaration here
that disagrees with the contract. The extension links libprosody.so, which the
wheel ships next to it in the package directory (rpath ``$ORIGIN``).

``PROSODY_LIB_DIR`` names the directory holding the freshly built
libprosody.so to link against (setup.py sets it after running ``go build``).
"""

from __future__ import annotations

import os
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = ROOT / "include"
LIB_DIR = Path(os.environ.get("PROSODY_LIB_DIR", ROOT / "build" / "python-lib"))

CDEF = """
#define PROSODY_OK 0
#define PROSODY_ERR_INVALID_ARGUMENT 1
#define PROSODY_ERR_INVALID_HANDLE 2
#define PROSODY_ERR_CONFIG 3
#define PROSODY_ERR_STATE 4
#define PROSODY_ERR_TRANSIENT 5
#define PROSODY_ERR_PERMANENT 6
#define PROSODY_ERR_TERMINAL 7
#define PROSODY_ERR_CANCELLED 8
#define PROSODY_ERR_CLOSED 9
#define PROSODY_ERR_AFTER_FORK 10
#define PROSODY_ERR_INTERNAL 11

#define PROSODY_EVENT_MESSAGE 1
#define PROSODY_EVENT_TIMER 2
#define PROSODY_EVENT_CANCELLED 3

#define PROSODY_OUTCOME_OK 0
#define PROSODY_OUTCOME_TRANSIENT 1
#define PROSODY_OUTCOME_PERMANENT 2

#define PROSODY_CONSUMER_UNCONFIGURED 0
#define PROSODY_CONSUMER_CONFIGURED 1
#define PROSODY_CONSUMER_RUNNING 2

#define PROSODY_LOG_DEBUG 1
#define PROSODY_LOG_INFO 2
#define PROSODY_LOG_WARN 3
#define PROSODY_LOG_ERROR 4

typedef void (*prosody_completion_fn)(void *user_data, int status, const char *message);
typedef void (*prosody_times_fn)(void *user_data, int status, const int64_t *times_ms, size_t count,
                                 const char *message);
typedef void (*prosody_notify_fn)(void *user_data);

typedef struct prosody_log_record {
  int32_t level;
  int64_t time_ms;
  const char *target;
  const char *message;
  const char *attributes;
} prosody_log_record;

typedef void (*prosody_log_fn)(void *user_data, const prosody_log_record *record);

typedef struct prosody_event {
  uint64_t event;
  int32_t kind;
  int32_t partition;
  int64_t offset;
  int64_t timestamp_ms;
  int64_t time_ms;
  const char *topic;
  size_t topic_len;
  const char *key;
  size_t key_len;
  const uint8_t *payload;
  size_t payload_len;
  const char *source_system;
  size_t source_system_len;
  const char *traceparent;
  size_t traceparent_len;
  const char *tracestate;
  size_t tracestate_len;
  const char *baggage;
  size_t baggage_len;
} prosody_event;

typedef struct prosody_handler_config {
  prosody_notify_fn notify;
  void *user_data;
} prosody_handler_config;

typedef struct prosody_trace_context {
  const char *traceparent;
  const char *tracestate;
  const char *baggage;
} prosody_trace_context;

typedef struct prosody_completion {
  uint64_t event;
  int32_t outcome;
  const char *message;
} prosody_completion;

int prosody_version(const char **version);
void prosody_free(void *ptr);
const char *prosody_status_name(int status);
int prosody_set_log_callback(prosody_log_fn fn, void *user_data, char **error_message);

int prosody_client_new(const char *config_json, uint64_t *client, char **error_message);
int prosody_client_release(uint64_t client, prosody_completion_fn done, void *user_data,
                           char **error_message);
int prosody_client_send(uint64_t client, const char *topic, const char *key, const uint8_t *payload,
                        size_t payload_len, const prosody_trace_context *trace,
                        prosody_completion_fn done, void *user_data, char **error_message);
int prosody_client_subscribe(uint64_t client, const prosody_handler_config *handler,
                             prosody_completion_fn done, void *user_data, char **error_message);
int prosody_client_unsubscribe(uint64_t client, prosody_completion_fn done, void *user_data,
                               char **error_message);
int prosody_client_event_fd(uint64_t client, int *fd, char **error_message);
int prosody_client_poll(uint64_t client, prosody_event *out, size_t capacity, size_t *count,
                        char **error_message);
int prosody_client_consumer_state(uint64_t client, int *state, char **error_message);
int prosody_client_source_system(uint64_t client, char **source_system, char **error_message);
int prosody_client_assigned_partition_count(uint64_t client, uint32_t *count, char **error_message);
int prosody_client_is_stalled(uint64_t client, int *stalled, char **error_message);

int prosody_event_complete(uint64_t event, int outcome, const char *message, char **error_message);
int prosody_events_complete(const prosody_completion *items, size_t n, char **error_message);
int prosody_event_should_cancel(uint64_t event, int *cancelled, char **error_message);
int prosody_event_release(uint64_t event, char **error_message);
int prosody_event_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                           char **error_message);
int prosody_event_clear_and_schedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb,
                                     void *user_data, char **error_message);
int prosody_event_unschedule(uint64_t event, int64_t time_ms, prosody_completion_fn cb, void *user_data,
                             char **error_message);
int prosody_event_clear_scheduled(uint64_t event, prosody_completion_fn cb, void *user_data,
                                  char **error_message);
int prosody_event_scheduled(uint64_t event, prosody_times_fn cb, void *user_data, char **error_message);

int prosody_admin_new(const char *config_json, uint64_t *admin, char **error_message);
int prosody_admin_create_topic(uint64_t admin, const char *topic_json, prosody_completion_fn done,
                               void *user_data, char **error_message);
int prosody_admin_delete_topic(uint64_t admin, const char *name, prosody_completion_fn done,
                               void *user_data, char **error_message);
int prosody_admin_release(uint64_t admin, char **error_message);

/* Trampolines into Python (prosody/_native.py). */
extern "Python" void _prosody_on_done(void *user_data, int status, const char *message);
extern "Python" void _prosody_on_times(void *user_data, int status, const int64_t *times_ms,
                                       size_t count, const char *message);
extern "Python" void _prosody_on_log(void *user_data, const prosody_log_record *record);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "prosody._prosody_cffi",
    '#include "prosody.h"\n',
    include_dirs=[str(INCLUDE_DIR)],
    library_dirs=[str(LIB_DIR)],
    libraries=["prosody"],
    # The extension finds libprosody.so in its own directory, wherever the
    # package is installed.
    extra_link_args=["-Wl,-rpath,$ORIGIN"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
