"""cffi build script for ``prosody._prosody_cffi`` (API, out-of-line mode).

The declarations come from include/prosody.h itself (header_cdef), and the
extension is compiled with the header included. The extension links libprosody.so, which the
wheel ships next to it in the package directory (rpath ``$ORIGIN``).

``PROSODY_LIB_DIR`` names the directory holding the freshly built
libprosody.so to link against (setup.py sets it after running ``go build``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = ROOT / "include"
LIB_DIR = Path(os.environ.get("PROSODY_LIB_DIR", ROOT / "build" / "python-lib"))


def header_cdef(header: Path) -> str:
    """The declarations of include/prosody.h in the form cffi's cdef takes.

    The header is the contract, so it is read rather than copied: comments,
    the include guard, the C++ block and defines that are not integers are
    left out; everything else is passed on as written.
    """
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    out: list[str] = []
    skipping = False  # inside #ifdef __cplusplus ... #endif
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if stripped.startswith("#ifdef __cplusplus"):
                skipping = True
            elif stripped.startswith("#endif"):
                skipping = False
            elif not skipping:
                define = re.fullmatch(r"#define\s+(PROSODY_\w+)\s+(-?\d+)", stripped)
                if define:
                    out.append(f"#define {define[1]} {define[2]}")
            continue
        if not skipping and stripped:
            out.append(line)
    return "\n".join(out) + "\n"


HELPER_DECLS = """
/* Helpers compiled into this extension (HELPERS below), for the event loop's hot path. */
typedef struct prosody_py_row {
  uint64_t event;
  int64_t kind;
  int64_t partition;
  int64_t offset;
  int64_t timestamp_ms;
  int64_t time_ms;
  int64_t topic_start;
  int64_t topic_end;
  int64_t key_start;
  int64_t key_end;
  int64_t payload_end;
  int64_t traceparent_end;
  int64_t tracestate_end;
  int64_t baggage_end;
} prosody_py_row;

size_t prosody_py_pack(const prosody_event *events, size_t n, prosody_py_row *rows, char *arena,
                       size_t capacity);
int prosody_py_complete(const uint64_t *ok, size_t n_ok, const prosody_completion *failed,
                        size_t n_failed);
"""

CDEF = header_cdef(INCLUDE_DIR / "prosody.h") + HELPER_DECLS + """
/* Trampolines into Python (prosody/_native.py). */
extern "Python" void _prosody_on_done(void *user_data, int status, const char *message);
extern "Python" void _prosody_on_times(void *user_data, int status, const int64_t *times_ms,
                                       size_t count, const char *message);
extern "Python" void _prosody_on_log(void *user_data, const prosody_log_record *record);
"""

# Two helpers for the event loop's hot path, written in C so that Python pays
# per batch, not per field:
#
# * prosody_py_pack copies a polled batch into one row of integers per event
#   (read with struct.iter_unpack) and one byte arena holding every event's
#   topic, key, payload and trace headers back to back (read as one bytes
#   object); a topic equal to the previous event's is not copied again. It
#   returns the bytes used, or, when the arena is too small, the bytes needed
#   (more than capacity) without writing the arena.
# * prosody_py_complete hands completions to one helper thread, which calls
#   prosody_events_complete, so the core's completion work runs beside the
#   event loop instead of on it. Failure texts are copied. The thread never
#   runs Python code. In a process forked after the thread started it returns
#   PROSODY_ERR_AFTER_FORK (as every library call there does) and queues
#   nothing; if the thread cannot be started (or memory runs out) it completes
#   on the calling thread.
HELPERS = r"""
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static size_t pp_put(char *arena, size_t pos, const void *bytes, size_t len) {
  if (len) memcpy(arena + pos, bytes, len);
  return pos + len;
}

size_t prosody_py_pack(const prosody_event *events, size_t n, prosody_py_row *rows, char *arena,
                       size_t capacity) {
  size_t need = 0, pos = 0, i;
  const char *last_topic = NULL;
  size_t last_len = 0;
  int64_t topic_start = 0, topic_end = 0;
  for (i = 0; i < n; i++) {
    const prosody_event *e = &events[i];
    need += e->topic_len + e->key_len + e->payload_len + e->traceparent_len + e->tracestate_len +
            e->baggage_len;
  }
  if (need > capacity) return need;
  for (i = 0; i < n; i++) {
    const prosody_event *e = &events[i];
    prosody_py_row *r = &rows[i];
    r->event = e->event;
    r->kind = e->kind;
    r->partition = e->partition;
    r->offset = e->offset;
    r->timestamp_ms = e->timestamp_ms;
    r->time_ms = e->time_ms;
    if (e->kind == PROSODY_EVENT_CANCELLED) { /* only event and kind are set */
      memset(&r->topic_start, 0, sizeof *r - offsetof(prosody_py_row, topic_start));
      continue;
    }
    if (last_topic == NULL || e->topic_len != last_len ||
        (last_len && memcmp(e->topic, last_topic, last_len) != 0)) {
      topic_start = (int64_t)pos;
      pos = pp_put(arena, pos, e->topic, e->topic_len);
      topic_end = (int64_t)pos;
      last_topic = e->topic ? e->topic : "";
      last_len = e->topic_len;
    }
    r->topic_start = topic_start;
    r->topic_end = topic_end;
    r->key_start = (int64_t)pos;
    pos = pp_put(arena, pos, e->key, e->key_len);
    r->key_end = (int64_t)pos;
    pos = pp_put(arena, pos, e->payload, e->payload_len);
    r->payload_end = (int64_t)pos;
    pos = pp_put(arena, pos, e->traceparent, e->traceparent_len);
    r->traceparent_end = (int64_t)pos;
    pos = pp_put(arena, pos, e->tracestate, e->tracestate_len);
    r->tracestate_end = (int64_t)pos;
    pos = pp_put(arena, pos, e->baggage, e->baggage_len);
    r->baggage_end = (int64_t)pos;
  }
  return pos;
}

static pthread_mutex_t pp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pp_cv = PTHREAD_COND_INITIALIZER;
static prosody_completion *pp_queue;
static size_t pp_len, pp_cap;
static pid_t pp_pid;     /* the process the thread runs in; 0 before it started */
static int pp_no_thread; /* the thread could not be started: complete on the caller */

static void pp_free_texts(prosody_completion *items, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) free((void *)items[i].message);
}

static void *pp_worker(void *arg) {
  prosody_completion *spare = NULL;
  size_t spare_cap = 0;
  (void)arg;
#ifdef __linux__
  pthread_setname_np(pthread_self(), "prosody-py-done");
#endif
  pthread_mutex_lock(&pp_mu);
  for (;;) {
    prosody_completion *batch;
    size_t n, cap;
    while (pp_len == 0) pthread_cond_wait(&pp_cv, &pp_mu);
    batch = pp_queue;
    n = pp_len;
    cap = pp_cap;
    pp_queue = spare;
    pp_cap = spare_cap;
    pp_len = 0;
    pthread_mutex_unlock(&pp_mu);
    /* Failures are events the library already finished (client released). */
    prosody_events_complete(batch, n, NULL);
    pp_free_texts(batch, n);
    spare = batch;
    spare_cap = cap;
    pthread_mutex_lock(&pp_mu);
  }
  return NULL;
}

static int pp_reserve(size_t extra) {
  size_t cap;
  prosody_completion *q;
  if (pp_len + extra <= pp_cap) return 1;
  cap = pp_cap ? pp_cap : 1024;
  while (cap < pp_len + extra) cap *= 2;
  q = (prosody_completion *)realloc(pp_queue, cap * sizeof *q);
  if (q == NULL) return 0;
  pp_queue = q;
  pp_cap = cap;
  return 1;
}

static int pp_complete_here(const uint64_t *ok, size_t n_ok, const prosody_completion *failed,
                            size_t n_failed) {
  int status = PROSODY_OK, s;
  size_t i;
  for (i = 0; i < n_ok; i++) {
    s = prosody_event_complete(ok[i], PROSODY_OUTCOME_OK, NULL, NULL);
    if (status == PROSODY_OK) status = s;
  }
  for (i = 0; i < n_failed; i++) {
    s = prosody_event_complete(failed[i].event, failed[i].outcome, failed[i].message, NULL);
    if (status == PROSODY_OK) status = s;
  }
  return status;
}

int prosody_py_complete(const uint64_t *ok, size_t n_ok, const prosody_completion *failed,
                        size_t n_failed) {
  pid_t pid = getpid(), owner = __atomic_load_n(&pp_pid, __ATOMIC_ACQUIRE);
  size_t i;
  if (owner != 0 && owner != pid) return PROSODY_ERR_AFTER_FORK; /* the lock may be held forever */
  if (n_ok + n_failed == 0) return PROSODY_OK;
  pthread_mutex_lock(&pp_mu);
  if (__atomic_load_n(&pp_pid, __ATOMIC_ACQUIRE) == 0 && !pp_no_thread) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, pp_worker, NULL) == 0) {
      __atomic_store_n(&pp_pid, pid, __ATOMIC_RELEASE);
    } else {
      pp_no_thread = 1;
    }
    pthread_attr_destroy(&attr);
  }
  if (pp_no_thread || !pp_reserve(n_ok + n_failed)) {
    pthread_mutex_unlock(&pp_mu);
    return pp_complete_here(ok, n_ok, failed, n_failed);
  }
  for (i = 0; i < n_ok; i++) {
    prosody_completion *c = &pp_queue[pp_len++];
    c->event = ok[i];
    c->outcome = PROSODY_OUTCOME_OK;
    c->message = NULL;
  }
  for (i = 0; i < n_failed; i++) {
    prosody_completion *c = &pp_queue[pp_len++];
    c->event = failed[i].event;
    c->outcome = failed[i].outcome;
    c->message = failed[i].message ? strdup(failed[i].message) : NULL;
  }
  pthread_cond_signal(&pp_cv);
  pthread_mutex_unlock(&pp_mu);
  return PROSODY_OK;
}
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "prosody._prosody_cffi",
    '#include "prosody.h"\n' + HELPER_DECLS + HELPERS,
    include_dirs=[str(INCLUDE_DIR)],
    library_dirs=[str(LIB_DIR)],
    libraries=["prosody"],
    # The extension finds libprosody.so in its own directory, wherever the
    # package is installed.
    extra_link_args=["-Wl,-rpath,$ORIGIN"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
