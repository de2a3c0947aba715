/*
 * bench.c - events/s through the C ABI with a no-op host handler: wait on
 * the event fd, poll a batch, complete the batch. Run by `make bench-c`
 * (tests/c/benchgo), which fills the topic and runs the Go engine alone on
 * the same topic for comparison.
 *
 *   prosody_bench_c CONFIG_JSON MESSAGES [direct]
 *
 * With "direct", the handler is an on_event callback that the library
 * calls on its own threads instead (it counts the event and returns OK).
 * CONFIG_JSON must name a fresh group_id so the topic is read from the
 * start. Prints one line: "c-abi <events> <seconds> <events/s>".
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "prosody.h"

#define BATCH 1024

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int status, char *err) {
  fprintf(stderr, "prosody_bench_c: %s: %s: %s\n", what, prosody_status_name(status), err ? err : "");
  exit(1);
}

static volatile int subscribe_status = -1;
static void on_subscribed(void *ud, int status, const char *msg) {
  (void)ud;
  if (status != PROSODY_OK) fprintf(stderr, "subscribe: %s\n", msg);
  subscribe_status = status;
}
static volatile int released;
static void on_released(void *ud, int status, const char *msg) {
  (void)ud, (void)status, (void)msg;
  released = 1;
}

static atomic_long direct_handled;

static int32_t on_event(void *ud, const prosody_event *ev, const char **message) {
  (void)ud, (void)ev, (void)message;
  atomic_fetch_add_explicit(&direct_handled, 1, memory_order_relaxed);
  return PROSODY_OUTCOME_OK;
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && strcmp(argv[3], "direct") == 0)) {
    fprintf(stderr, "usage: %s CONFIG_JSON MESSAGES [direct]\n", argv[0]);
    return 2;
  }
  long target = atol(argv[2]);
  int direct = argc == 4;
  char *err = NULL;
  uint64_t client;
  int fd, st;
  if ((st = prosody_client_new(argv[1], &client, &err))) die("client_new", st, err);
  if ((st = prosody_client_event_fd(client, &fd, &err))) die("event_fd", st, err);
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  if (direct) h.on_event = on_event;
  double start = now_s();
  if ((st = prosody_client_subscribe(client, &h, on_subscribed, NULL, &err))) die("subscribe", st, err);
  if (direct) {
    while (atomic_load(&direct_handled) < target) {
      if (subscribe_status > 0) return 1;
      struct timespec ts = {0, 200 * 1000};
      nanosleep(&ts, NULL);
    }
    double el = now_s() - start;
    long handled = atomic_load(&direct_handled);
    printf("c-abi %ld %.3f %.0f (direct)\n", handled, el, handled / el);
    if ((st = prosody_client_release(client, on_released, NULL, &err))) die("release", st, err);
    while (!released) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    return 0;
  }

  static prosody_event events[BATCH];
  static prosody_completion done[BATCH];
  long handled = 0, polls = 0;
  while (handled < target) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 1000) <= 0) {
      if (subscribe_status > 0) return 1;
      continue;
    }
    size_t n;
    do {
      if ((st = prosody_client_poll(client, events, BATCH, sizeof(prosody_event), &n, &err))) die("poll", st, err);
      polls++;
      size_t k = 0;
      for (size_t i = 0; i < n; i++) {
        if (events[i].kind == PROSODY_EVENT_CANCELLED) continue;
        done[k++] = (prosody_completion){events[i].event, PROSODY_OUTCOME_OK, NULL};
      }
      if ((st = prosody_events_complete(done, k, sizeof(prosody_completion), &err))) die("complete", st, err);
      handled += (long)k;
    } while (n == BATCH);
  }
  double el = now_s() - start;
  printf("c-abi %ld %.3f %.0f (%.1f events/poll)\n", handled, el, handled / el, (double)handled / polls);
  if ((st = prosody_client_release(client, on_released, NULL, &err))) die("release", st, err);
  while (!released) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}
