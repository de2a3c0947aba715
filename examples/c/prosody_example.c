/*
 * prosody_example.c - the Prosody C ABI end to end, in mock mode (an
 * in-process Kafka cluster: nothing touches the network).
 *
 * One client consumes a topic with a handler; another client, with a
 * different source_system, sends to it (a client's own sends are filtered
 * out by its own consumer). The handler side waits on the library's
 * eventfd, takes ready events in batches with prosody_client_poll, prints
 * them and completes them in one call each batch. Each message also
 * schedules a follow-up timer for its key, about 1.5 s ahead (replacing the
 * key's earlier one); when it is due, the timer arrives through the same
 * poll as a PROSODY_EVENT_TIMER and is printed and completed too.
 *
 *   make example        # builds libprosody.so and runs this
 *   cc prosody_example.c $(pkg-config --cflags --libs prosody) -lpthread
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prosody.h>

#define TOPIC "prosody-c-example"
#define MESSAGES 10
#define BATCH 64
#define KEYS 3 /* one follow-up timer fires per key */

/* A completion the main thread waits for. */
typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int pending; /* completions still expected */
  int failures;
} waiter;

static void waiter_init(waiter *w, int pending) {
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->pending = pending;
  w->failures = 0;
}

/* prosody_completion_fn: runs on a library thread, so it only records. */
static void on_done(void *user_data, int status, const char *message) {
  waiter *w = user_data;
  pthread_mutex_lock(&w->mu);
  if (status != PROSODY_OK) {
    fprintf(stderr, "operation failed: %s: %s\n", prosody_status_name(status), message);
    w->failures++;
  }
  w->pending--;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int waiter_wait(waiter *w) {
  pthread_mutex_lock(&w->mu);
  while (w->pending > 0) pthread_cond_wait(&w->cv, &w->mu);
  int failures = w->failures;
  pthread_mutex_unlock(&w->mu);
  return failures;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Exits with the library's message when a call fails at once. */
static void check(int status, char *error, const char *what) {
  if (status == PROSODY_OK) return;
  fprintf(stderr, "%s: %s: %s\n", what, prosody_status_name(status), error ? error : "");
  prosody_free(error);
  exit(1);
}

/* prosody_log_fn: the library's log records, printed our way. */
static void on_log(void *user_data, const prosody_log_record *r) {
  (void)user_data;
  static const char *names[] = {"?", "DEBUG", "INFO", "WARN", "ERROR"};
  fprintf(stderr, "[prosody %s] %s %s\n", names[r->level >= 1 && r->level <= 4 ? r->level : 0], r->message,
          r->attributes);
}

int main(void) {
  char *err = NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  check(prosody_set_log_callback(on_log, NULL, &err), err, "prosody_set_log_callback");
  const char *version;
  check(prosody_version(&version), NULL, "prosody_version");
  printf("libprosody %s\n", version);

  /* The topic, created with the admin client. */
  uint64_t admin;
  check(prosody_admin_new("{\"bootstrap_servers\":\"localhost:9094\",\"mock\":true}", &admin, &err), err,
        "prosody_admin_new");
  waiter created;
  waiter_init(&created, 1);
  check(prosody_admin_create_topic(admin, "{\"name\":\"" TOPIC "\",\"partition_count\":2}", on_done, &created, &err),
        err, "prosody_admin_create_topic");
  if (waiter_wait(&created)) return 1;

  /* The consumer. */
  uint64_t receiver;
  check(prosody_client_new("{\"bootstrap_servers\":\"localhost:9094\",\"mock\":true,"
                           "\"group_id\":\"c-example\",\"subscribed_topics\":\"" TOPIC "\","
                           "\"commit_interval\":\"100ms\"}",
                           &receiver, &err),
        err, "prosody_client_new (receiver)");
  int fd;
  check(prosody_client_event_fd(receiver, &fd, &err), err, "prosody_client_event_fd");
  prosody_handler_config handler = {.size = sizeof(prosody_handler_config), .notify = NULL, .user_data = NULL}; /* we watch the fd */
  waiter subscribed;
  waiter_init(&subscribed, 1);
  check(prosody_client_subscribe(receiver, &handler, on_done, &subscribed, &err), err, "prosody_client_subscribe");
  if (waiter_wait(&subscribed)) return 1;

  /* The sender: another source system, or the receiver would skip them. */
  uint64_t sender;
  check(prosody_client_new("{\"bootstrap_servers\":\"localhost:9094\",\"mock\":true,"
                           "\"source_system\":\"c-example-sender\"}",
                           &sender, &err),
        err, "prosody_client_new (sender)");
  waiter sent;
  waiter_init(&sent, MESSAGES);
  for (int i = 0; i < MESSAGES; i++) {
    char key[32], payload[128];
    snprintf(key, sizeof key, "key-%d", i % KEYS);
    int n = snprintf(payload, sizeof payload, "{\"id\":\"evt-%d\",\"type\":\"example.greeting\",\"n\":%d}", i, i);
    check(prosody_client_send(sender, TOPIC, strlen(TOPIC), key, strlen(key), (const uint8_t *)payload, (size_t)n, NULL, on_done, &sent, &err), err,
          "prosody_client_send");
  }
  if (waiter_wait(&sent)) return 1;
  printf("sent %d messages\n", MESSAGES);

  /* The handler loop: wait for the fd, poll a batch, handle it, complete
   * it. Handling a message schedules its key's follow-up timer; the batch
   * is completed once those operations reported back (an event's timer
   * operations must finish before the event does). */
  prosody_event batch[BATCH];
  prosody_completion done[BATCH];
  int handled = 0, fired = 0;
  while (handled < MESSAGES || fired < KEYS) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, 10000);
    if (r == 0) {
      fprintf(stderr, "timed out after %d of %d messages, %d of %d timers\n", handled, MESSAGES, fired, KEYS);
      return 1;
    }
    if (r < 0 && errno != EINTR) return 1;
    size_t count;
    do {
      check(prosody_client_poll(receiver, batch, BATCH, sizeof(prosody_event), &count, &err), err, "prosody_client_poll");
      waiter scheduled;
      waiter_init(&scheduled, 0);
      size_t n = 0;
      for (size_t i = 0; i < count; i++) {
        prosody_event *e = &batch[i];
        if (e->kind == PROSODY_EVENT_CANCELLED) continue; /* we answer quickly anyway */
        if (e->kind == PROSODY_EVENT_TIMER) {
          printf("timer fired key=%.*s due=%lld late=%lldms\n", (int)e->key_len, e->key, (long long)e->time_ms,
                 (long long)(now_ms() - e->time_ms));
          fired++;
        } else {
          printf("handled %.*s/%d@%lld key=%.*s source=%.*s payload=%.*s\n", (int)e->topic_len, e->topic,
                 e->partition, (long long)e->offset, (int)e->key_len, e->key, (int)e->source_system_len,
                 e->source_system, (int)e->payload_len, (const char *)e->payload);
          handled++;
          pthread_mutex_lock(&scheduled.mu);
          scheduled.pending++;
          pthread_mutex_unlock(&scheduled.mu);
          check(prosody_event_clear_and_schedule(e->event, now_ms() + 1500, on_done, &scheduled, &err), err,
                "prosody_event_clear_and_schedule");
        }
        done[n++] = (prosody_completion){.event = e->event, .outcome = PROSODY_OUTCOME_OK, .message = NULL};
      }
      if (waiter_wait(&scheduled)) return 1;
      check(prosody_events_complete(done, n, sizeof(prosody_completion), &err), err, "prosody_events_complete");
    } while (count == BATCH);
  }

  /* Shut down: unsubscribe (commits), then release everything. */
  waiter stopped;
  waiter_init(&stopped, 1);
  check(prosody_client_unsubscribe(receiver, on_done, &stopped, &err), err, "prosody_client_unsubscribe");
  if (waiter_wait(&stopped)) return 1;
  waiter released;
  waiter_init(&released, 2);
  check(prosody_client_release(receiver, on_done, &released, &err), err, "prosody_client_release (receiver)");
  check(prosody_client_release(sender, on_done, &released, &err), err, "prosody_client_release (sender)");
  if (waiter_wait(&released)) return 1;
  check(prosody_admin_release(admin, &err), err, "prosody_admin_release");
  printf("handled %d messages and %d timers; unsubscribed and released cleanly\n", handled, fired);
  return 0;
}
