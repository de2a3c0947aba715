/* testutil.h - a tiny harness for the C ABI tests. */
#ifndef PROSODY_TESTUTIL_H
#define PROSODY_TESTUTIL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prosody.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);                    \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Checks a status and, for failures, that the message mentions substr; frees
 * the message. */
#define EXPECT(call, want, substr)                                                                 \
  do {                                                                                             \
    char *err_ = NULL;                                                                             \
    char **errp_ = &err_;                                                                          \
    (void)errp_;                                                                                   \
    int got_ = (call);                                                                             \
    expect_status(__FILE__, __LINE__, #call, got_, (want), err_, (substr));                        \
  } while (0)

static void expect_status(const char *file, int line, const char *call, int got, int want, char *err,
                          const char *substr) {
  if (got != want) {
    fprintf(stderr, "%s:%d: %s = %s, want %s (%s)\n", file, line, call, prosody_status_name(got),
            prosody_status_name(want), err ? err : "no message");
    failures++;
  } else if (want != PROSODY_OK && substr != NULL && (err == NULL || strstr(err, substr) == NULL)) {
    fprintf(stderr, "%s:%d: %s: message %s does not mention \"%s\"\n", file, line, call,
            err ? err : "(null)", substr);
    failures++;
  } else if (want == PROSODY_OK && err != NULL) {
    fprintf(stderr, "%s:%d: %s succeeded but set a message: %s\n", file, line, call, err);
    failures++;
  }
  prosody_free(err);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A completion the test waits for. */
typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int pending;
  int status; /* of the last completion */
  char message[512];
} waiter;

static void waiter_init(waiter *w, int pending) {
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->pending = pending;
  w->status = -1;
  w->message[0] = 0;
}

static void on_done(void *user_data, int status, const char *message) {
  waiter *w = user_data;
  pthread_mutex_lock(&w->mu);
  if (w->status <= 0) { /* keep the first failure */
    w->status = status;
    snprintf(w->message, sizeof w->message, "%s", message ? message : "");
  }
  w->pending--;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* Waits up to timeout_s; returns the (first failing) status, or -1. */
static int waiter_wait(waiter *w, double timeout_s) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)timeout_s;
  pthread_mutex_lock(&w->mu);
  while (w->pending > 0) {
    if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) != 0) break;
  }
  int status = w->pending > 0 ? -1 : w->status;
  pthread_mutex_unlock(&w->mu);
  return status;
}

static void waiter_destroy(waiter *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

/* Runs an async call and waits for its completion status. */
#define AWAIT(w, call, timeout_s, want)                                                            \
  do {                                                                                             \
    waiter_init((w), 1);                                                                           \
    char *err_ = NULL;                                                                             \
    int st_ = (call);                                                                              \
    if (st_ != PROSODY_OK) {                                                                       \
      fprintf(stderr, "%s:%d: %s = %s (%s)\n", __FILE__, __LINE__, #call,                         \
              prosody_status_name(st_), err_ ? err_ : "");                                         \
      failures++;                                                                                  \
      prosody_free(err_);                                                                          \
    } else {                                                                                       \
      int got_ = waiter_wait((w), (timeout_s));                                                    \
      if (got_ != (want)) {                                                                        \
        fprintf(stderr, "%s:%d: %s completed with %s, want %s (%s)\n", __FILE__, __LINE__, #call, \
                got_ < 0 ? "TIMEOUT" : prosody_status_name(got_), prosody_status_name(want),       \
                (w)->message);                                                                     \
        failures++;                                                                                \
      }                                                                                            \
    }                                                                                              \
    waiter_destroy(w);                                                                             \
  } while (0)

/* Polls client until at least want items arrived (or timeout); returns the
 * number stored in out. */
static size_t collect(uint64_t client, prosody_event *out, size_t cap, size_t want, double timeout_s) {
  int fd = -1;
  char *err = NULL;
  if (prosody_client_event_fd(client, &fd, &err) != PROSODY_OK) {
    fprintf(stderr, "event_fd: %s\n", err);
    prosody_free(err);
    failures++;
    return 0;
  }
  size_t have = 0;
  double deadline = now_s() + timeout_s;
  while (have < want && now_s() < deadline) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    size_t n = 0;
    if (prosody_client_poll(client, out + have, cap - have, sizeof(prosody_event), &n, &err) != PROSODY_OK) {
      fprintf(stderr, "poll: %s\n", err);
      prosody_free(err);
      failures++;
      return have;
    }
    have += n;
  }
  return have;
}

#endif
