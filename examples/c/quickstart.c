/*
 * The Quick Start in C, in mock mode: an in-memory Kafka cluster inside
 * this process, so it needs no broker and no Cassandra. The handler is
 * called on the library's threads (on_event); prosody_example.c shows the
 * other way in, polling a batch of events from an event loop.
 *
 *   make lib && cc examples/c/quickstart.c -Iinclude -Lbuild/lib -lprosody -lpthread
 *   cc quickstart.c $(pkg-config --cflags --libs prosody) -lpthread   # after make install
 */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prosody.h>

#define MESSAGES 5

/* Completions arrive on library threads: record them and wake the waiter. */
typedef struct done {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int pending, failed;
} done;

static void on_done(void *user_data, int status, const char *message) {
  done *d = user_data;
  pthread_mutex_lock(&d->mu);
  if (status != PROSODY_OK) {
    fprintf(stderr, "failed: %s: %s\n", prosody_status_name(status), message);
    d->failed = 1;
  }
  d->pending--;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void expect(done *d, int n) {
  pthread_mutex_lock(&d->mu);
  d->pending += n;
  pthread_mutex_unlock(&d->mu);
}

static void wait_for(done *d) {
  pthread_mutex_lock(&d->mu);
  while (d->pending > 0) pthread_cond_wait(&d->cv, &d->mu);
  pthread_mutex_unlock(&d->mu);
  if (d->failed) exit(1);
}

static void check(int status, char *error) {
  if (status == PROSODY_OK) return;
  fprintf(stderr, "%s: %s\n", prosody_status_name(status), error ? error : "");
  exit(1);
}

static done handled = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, MESSAGES + 1, 0};

/* Called for every message and timer, never twice at once for one key. */
static int32_t on_event(void *user_data, const prosody_event *e, const char **failure) {
  (void)user_data, (void)failure;
  if (e->kind == PROSODY_EVENT_TIMER) {
    printf("Timer fired for key: %.*s at %lld\n", (int)e->key_len, e->key, (long long)e->time_ms);
  } else {
    printf("Received message: key=%.*s payload=%.*s\n", (int)e->key_len, e->key, (int)e->payload_len,
           (const char *)e->payload);
    if (memmem(e->payload, e->payload_len, "\"schedule_followup\":true", 24)) {
      /* Timers are kept in memory in mock mode (Cassandra otherwise). */
      done scheduled = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0};
      check(prosody_event_schedule(e->event, (int64_t)time(NULL) * 1000 + 1000, on_done, &scheduled, NULL), NULL);
      wait_for(&scheduled); /* the operation must finish before the handler returns */
    }
  }
  on_done(&handled, PROSODY_OK, NULL);
  return PROSODY_OUTCOME_OK;
}

int main(void) {
  char *err = NULL;
  uint64_t client;
  /* To allow loopbacks, the source system must differ from the group id. */
  check(prosody_client_new("{\"bootstrap_servers\":\"localhost:9092\",\"mock\":true,"
                           "\"source_system\":\"my-application-source\",\"group_id\":\"my-application\","
                           "\"subscribed_topics\":\"my-topic\",\"probe_port\":null}",
                           &client, &err),
        err);
  done ops = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  prosody_handler_config handler = {.size = sizeof handler, .on_event = on_event};
  expect(&ops, 1);
  check(prosody_client_subscribe(client, &handler, on_done, &ops, &err), err);
  wait_for(&ops);

  for (int i = 0; i < MESSAGES; i++) {
    char key[32], payload[128];
    if (i == 0) {
      strcpy(key, "message-key");
      strcpy(payload, "{\"content\":\"Hello, Kafka!\",\"schedule_followup\":true}");
    } else {
      snprintf(key, sizeof key, "key-%d", i);
      snprintf(payload, sizeof payload, "{\"content\":\"message %d\"}", i);
    }
    expect(&ops, 1);
    check(prosody_client_send(client, "my-topic", 8, key, strlen(key), (const uint8_t *)payload, strlen(payload), NULL,
                              on_done, &ops, &err),
          err);
  }
  wait_for(&ops);
  wait_for(&handled); /* every message and the timer */

  expect(&ops, 1);
  check(prosody_client_release(client, on_done, &ops, &err), err); /* unsubscribes, then closes */
  wait_for(&ops);
  printf("Handled %d messages and 1 timer.\n", MESSAGES);
  return 0;
}
