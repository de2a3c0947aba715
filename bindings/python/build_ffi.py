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
import sys
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
/* A helper compiled into this extension (HELPERS below), for the event loop's hot path. */
int prosody_py_complete(const uint64_t *ok, size_t n_ok, const prosody_completion *failed,
                        size_t n_failed);
"""

CDEF = header_cdef(INCLUDE_DIR / "prosody.h") + HELPER_DECLS + """
/* Trampolines into Python (prosody/_native.py). */
extern "Python" void _prosody_on_done(void *user_data, int status, const char *message);
extern "Python" void _prosody_on_times(void *user_data, int status, const int64_t *times_ms,
                                       size_t count, const char *message);
extern "Python" void _prosody_on_log(void *user_data, const prosody_log_record *record);
extern "Python" void _prosody_on_state(void *user_data, int status, const prosody_state_item *items, size_t n,
                                       uint64_t number, const char *message);
"""

# A helper for the event loop's hot path, written in C: prosody_py_complete
# hands completions to one helper thread, which calls
# prosody_events_complete, so the core's completion work runs beside the
# event loop instead of on it. Failure texts are copied. The thread never
# runs Python code. In a process forked after the thread started it returns
# PROSODY_ERR_AFTER_FORK (as every library call there does) and queues
# nothing; if the thread cannot be started (or memory runs out) it completes
# on the calling thread. (Building the Python objects of a polled batch is
# prosody/_batch.c, an ordinary extension module: it needs the Python C API.)
HELPERS = r"""
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


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
    prosody_events_complete(batch, n, sizeof *batch, NULL);
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
    # The extension finds libprosody in its own directory, wherever the
    # package is installed.
    extra_link_args=["-Wl,-rpath,@loader_path" if sys.platform == "darwin" else "-Wl,-rpath,$ORIGIN"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
