/*
 * test_capi.c - tests of every function of include/prosody.h, including
 * misuse, run under AddressSanitizer by tests/c/run.sh.
 *
 *   test_capi            mock-mode tests and the fork test
 *   test_capi --kafka H [--cassandra C]
 *                        also a round trip against the real Kafka at H,
 *                        and a timer through Kafka and Cassandra at C
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define MOCK "\"bootstrap_servers\":\"localhost:9094\",\"mock\":true"

static int test_seq;

/* A unique topic/group name for this test run. */
static void unique(char *buf, size_t n, const char *what) {
  snprintf(buf, n, "capi-%s-%d-%d", what, (int)getpid(), ++test_seq);
}

/* ---- logging ---- */

static atomic_int log_records;
static atomic_int log_bad;

static void on_log(void *user_data, const prosody_log_record *r) {
  if (user_data != &log_records || r->message == NULL || r->target == NULL || r->attributes == NULL ||
      r->level < PROSODY_LOG_DEBUG || r->level > PROSODY_LOG_ERROR || r->time_ms <= 0) {
    atomic_fetch_add(&log_bad, 1);
  }
  atomic_fetch_add(&log_records, 1);
}

/* ---- notify ---- */

static atomic_int notifies;

static void on_notify(void *user_data) {
  if (user_data == &notifies) atomic_fetch_add(&notifies, 1);
}

/* ---- helpers ---- */

static uint64_t new_client(const char *json) {
  uint64_t c = 0;
  char *err = NULL;
  int st = prosody_client_new(json, &c, &err);
  CHECK(st == PROSODY_OK, "prosody_client_new(%s): %s: %s", json, prosody_status_name(st), err ? err : "");
  prosody_free(err);
  return c;
}

static void create_topic(uint64_t admin, const char *name, int partitions) {
  char js[256];
  snprintf(js, sizeof js, "{\"name\":\"%s\",\"partition_count\":%d}", name, partitions);
  waiter w;
  AWAIT(&w, prosody_admin_create_topic(admin, js, on_done, &w, &err_), 30, PROSODY_OK);
}

static void send_n(uint64_t sender, const char *topic, int n, const char *key_prefix) {
  waiter w;
  waiter_init(&w, n);
  for (int i = 0; i < n; i++) {
    char key[64], payload[128];
    snprintf(key, sizeof key, "%s-%d", key_prefix, i);
    int len = snprintf(payload, sizeof payload, "{\"id\":\"%s\",\"type\":\"test\",\"i\":%d}", key, i);
    EXPECT(prosody_client_send(sender, topic, strlen(topic), key, strlen(key), (const uint8_t *)payload, (size_t)len, NULL, on_done, &w, errp_),
           PROSODY_OK, NULL);
  }
  int st = waiter_wait(&w, 30);
  CHECK(st == PROSODY_OK, "sending: %s %s", st < 0 ? "timeout" : prosody_status_name(st), w.message);
  waiter_destroy(&w);
}

/* Sends one message under key, its payload's id unique (the producer
 * suppresses a repeated id). */
static void send_one(uint64_t sender, const char *topic, const char *key) {
  static atomic_int n;
  char payload[128];
  int len = snprintf(payload, sizeof payload, "{\"id\":\"%s-%d\",\"type\":\"test\"}", key, atomic_fetch_add(&n, 1));
  waiter w;
  AWAIT(&w, prosody_client_send(sender, topic, strlen(topic), key, strlen(key), (const uint8_t *)payload, (size_t)len, NULL, on_done, &w, &err_),
        30, PROSODY_OK);
}

static void release_client(uint64_t c) {
  waiter w;
  AWAIT(&w, prosody_client_release(c, on_done, &w, &err_), 60, PROSODY_OK);
}

static void subscribe(uint64_t c, prosody_handler_config *h) {
  waiter w;
  AWAIT(&w, prosody_client_subscribe(c, h, on_done, &w, &err_), 30, PROSODY_OK);
}

static void unsubscribe(uint64_t c) {
  waiter w;
  AWAIT(&w, prosody_client_unsubscribe(c, on_done, &w, &err_), 60, PROSODY_OK);
}

/* ---- timers ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The result of prosody_event_scheduled. */
typedef struct times_result {
  waiter w;
  int64_t times[16];
  size_t count;
  int bad; /* the array or message broke the contract */
} times_result;

static void on_times(void *user_data, int status, const int64_t *times_ms, size_t count, const char *message) {
  times_result *r = user_data;
  pthread_mutex_lock(&r->w.mu);
  r->bad |= (status == PROSODY_OK) != (message == NULL);
  r->bad |= count > 0 && (times_ms == NULL || status != PROSODY_OK);
  r->bad |= count == 0 && times_ms != NULL;
  r->count = count < 16 ? count : 16;
  for (size_t i = 0; i < r->count; i++) r->times[i] = times_ms[i];
  r->w.status = status;
  snprintf(r->w.message, sizeof r->w.message, "%s", message ? message : "");
  r->w.pending--;
  pthread_cond_broadcast(&r->w.cv);
  pthread_mutex_unlock(&r->w.mu);
}

/* Checks that the event's key has exactly the want[0..n) timers. */
#define EXPECT_TIMES(ev, ...)                                                                      \
  do {                                                                                             \
    int64_t want_[] = {0, __VA_ARGS__};                                                            \
    expect_times(__LINE__, (ev), want_ + 1, sizeof want_ / sizeof want_[0] - 1);                   \
  } while (0)
#define EXPECT_NO_TIMES(ev) expect_times(__LINE__, (ev), NULL, 0)

static void expect_times(int line, uint64_t ev, const int64_t *want, size_t n) {
  times_result r = {0};
  waiter_init(&r.w, 1);
  char *err = NULL;
  int st = prosody_event_scheduled(ev, on_times, &r, &err);
  if (st != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_event_scheduled = %s (%s)\n", line, prosody_status_name(st), err ? err : "");
    prosody_free(err);
    failures++;
  } else if ((st = waiter_wait(&r.w, 30)) != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_event_scheduled completed with %s (%s)\n", line,
            st < 0 ? "TIMEOUT" : prosody_status_name(st), r.w.message);
    failures++;
  } else {
    int same = r.count == n && !r.bad;
    for (size_t i = 0; same && i < n; i++) same = r.times[i] == want[i];
    if (!same) {
      fprintf(stderr, "line %d: scheduled times differ (bad=%d): got", line, r.bad);
      for (size_t i = 0; i < r.count; i++) fprintf(stderr, " %lld", (long long)r.times[i]);
      fprintf(stderr, ", want");
      for (size_t i = 0; i < n; i++) fprintf(stderr, " %lld", (long long)want[i]);
      fputc('\n', stderr);
      failures++;
    }
  }
  waiter_destroy(&r.w);
}

/* Waits for the next item of kind on consumer (others are a failure). */
static int next_event(uint64_t consumer, int32_t kind, prosody_event *out, double timeout_s) {
  size_t got = collect(consumer, out, 1, 1, timeout_s);
  CHECK(got == 1, "no event of kind %d within %.0fs", kind, timeout_s);
  if (got != 1) return 0;
  CHECK(out->kind == kind, "event kind %d, want %d", out->kind, kind);
  return out->kind == kind;
}

/* ---- tests ---- */

static void test_library(void) {
  const char *v = NULL;
  CHECK(prosody_version(&v) == PROSODY_OK && v && strcmp(v, PROSODY_VERSION) == 0,
        "version %s, header %s", v ? v : "(null)", PROSODY_VERSION);
  CHECK(prosody_version(NULL) == PROSODY_ERR_INVALID_ARGUMENT, "version(NULL)");
  CHECK(strcmp(prosody_status_name(PROSODY_ERR_CONFIG), "PROSODY_ERR_CONFIG") == 0, "status name");
  CHECK(strcmp(prosody_status_name(12345), "PROSODY_ERR_UNKNOWN") == 0, "unknown status name");
  CHECK(strcmp(prosody_status_name(PROSODY_ERR_NULL_VALUE), "PROSODY_ERR_NULL_VALUE") == 0, "status name");
  prosody_free(NULL);
  EXPECT(prosody_set_log_callback(on_log, &log_records, errp_), PROSODY_OK, NULL);
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_flush_telemetry(0, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "timeout_ms");
  EXPECT(prosody_flush_telemetry(1000, NULL, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "done");
  waiter_destroy(&w);
  int recording = -1;
  EXPECT(prosody_tracing_recording(NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "recording");
  EXPECT(prosody_tracing_recording(&recording, errp_), PROSODY_OK, NULL);
  CHECK(recording == 0, "no OTLP endpoint, yet the core records spans (%d)", recording);
  /* No emitter runs (mock mode has none): nothing to wait for. */
  AWAIT(&w, prosody_flush_telemetry(1000, on_done, &w, &err_), 30, PROSODY_OK);
}

static void test_client_config_errors(void) {
  uint64_t c = 0;
  EXPECT(prosody_client_new(NULL, &c, errp_), PROSODY_ERR_INVALID_ARGUMENT, "config_json");
  EXPECT(prosody_client_new("{" MOCK "}", NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "client");
  EXPECT(prosody_client_new("{not json", &c, errp_), PROSODY_ERR_CONFIG, "JSON");
  EXPECT(prosody_client_new("{" MOCK ",\"max_concurrency\":0}", &c, errp_), PROSODY_ERR_CONFIG, "max_concurrency");
  EXPECT(prosody_client_new("{" MOCK ",\"mode\":\"sideways\"}", &c, errp_), PROSODY_ERR_CONFIG, "mode");
  EXPECT(prosody_client_new("{" MOCK ",\"no_such_option\":1}", &c, errp_), PROSODY_ERR_CONFIG, "no_such_option");
  /* error_message may be NULL */
  CHECK(prosody_client_new("{" MOCK ",\"max_concurrency\":0}", &c, NULL) == PROSODY_ERR_CONFIG, "NULL errmsg");
  CHECK(c == 0, "no handle on failure");
  /* Variables set after the library loaded are seen, and so are removals. */
  setenv("PROSODY_MAX_CONCURRENCY", "lots", 1);
  EXPECT(prosody_client_new("{" MOCK "}", &c, errp_), PROSODY_ERR_CONFIG, "PROSODY_MAX_CONCURRENCY");
  unsetenv("PROSODY_MAX_CONCURRENCY");
  EXPECT(prosody_client_new("{" MOCK "}", &c, errp_), PROSODY_OK, NULL);
  release_client(c);
}

static void test_client_queries(void) {
  uint64_t producer = new_client("{" MOCK ",\"source_system\":\"capi-src\"}");
  uint64_t consumer = new_client("{" MOCK ",\"group_id\":\"capi-grp\",\"subscribed_topics\":\"t\"}");
  char *s = NULL;
  EXPECT(prosody_client_source_system(producer, &s, errp_), PROSODY_OK, NULL);
  CHECK(s && strcmp(s, "capi-src") == 0, "source system %s", s ? s : "(null)");
  prosody_free(s);
  s = NULL;
  EXPECT(prosody_client_source_system(consumer, &s, errp_), PROSODY_OK, NULL);
  CHECK(s && strcmp(s, "capi-grp") == 0, "source system falls back to group id: %s", s ? s : "(null)");
  prosody_free(s);
  EXPECT(prosody_client_source_system(consumer, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "source_system");

  int state = -1;
  EXPECT(prosody_client_consumer_state(producer, &state, errp_), PROSODY_OK, NULL);
  CHECK(state == PROSODY_CONSUMER_UNCONFIGURED, "producer-only state %d", state);
  EXPECT(prosody_client_consumer_state(consumer, &state, errp_), PROSODY_OK, NULL);
  CHECK(state == PROSODY_CONSUMER_CONFIGURED, "consumer state %d", state);
  EXPECT(prosody_client_consumer_state(consumer, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "state");

  uint32_t parts = 99;
  EXPECT(prosody_client_assigned_partition_count(consumer, &parts, errp_), PROSODY_OK, NULL);
  CHECK(parts == 0, "partitions before subscribe %u", parts);
  EXPECT(prosody_client_assigned_partition_count(consumer, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "count");
  int stalled = 99;
  EXPECT(prosody_client_is_stalled(consumer, &stalled, errp_), PROSODY_OK, NULL);
  CHECK(stalled == 0, "stalled %d", stalled);
  EXPECT(prosody_client_is_stalled(consumer, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "stalled");

  int fd = -1;
  EXPECT(prosody_client_event_fd(consumer, &fd, errp_), PROSODY_OK, NULL);
  CHECK(fd >= 0, "fd %d", fd);
  EXPECT(prosody_client_event_fd(consumer, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "fd");

  prosody_event ev[4];
  size_t n = 99;
  EXPECT(prosody_client_poll(consumer, ev, 4, sizeof(prosody_event), &n, errp_), PROSODY_OK, NULL);
  CHECK(n == 0, "nothing ready, got %zu", n);
  EXPECT(prosody_client_poll(consumer, ev, 4, sizeof(prosody_event), NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "count");
  EXPECT(prosody_client_poll(consumer, NULL, 4, sizeof(prosody_event), &n, errp_), PROSODY_ERR_INVALID_ARGUMENT, "out");
  EXPECT(prosody_client_poll(consumer, NULL, 0, sizeof(prosody_event), &n, errp_), PROSODY_OK, NULL);

  /* Subscribing needs a consumer configuration; sending a source system. */
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_client_subscribe(producer, &h, on_done, &w, errp_), PROSODY_ERR_CONFIG, "group_id");
  EXPECT(prosody_client_subscribe(consumer, NULL, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "handler");
  EXPECT(prosody_client_subscribe(consumer, &h, NULL, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "done");
  EXPECT(prosody_client_unsubscribe(consumer, on_done, &w, errp_), PROSODY_ERR_STATE, "not subscribed");
  EXPECT(prosody_client_unsubscribe(consumer, NULL, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "done");
  waiter_destroy(&w);

  uint64_t mute = new_client("{" MOCK "}");
  EXPECT(prosody_client_send(mute, "t", 1, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, errp_), PROSODY_ERR_CONFIG,
         "source_system");
  EXPECT(prosody_client_send(producer, NULL, 1, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "topic");
  EXPECT(prosody_client_send(producer, "t", 1, NULL, 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "key");
  EXPECT(prosody_client_send(producer, "t", 1, "k", 1, NULL, 2, NULL, on_done, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "payload");
  EXPECT(prosody_client_send(producer, "t", 1, "k", 1, (const uint8_t *)"{}", 2, NULL, NULL, NULL, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "done");

  release_client(mute);
  release_client(producer);
  release_client(consumer);
}

static void test_handles(void) {
  uint64_t c = new_client("{" MOCK ",\"source_system\":\"capi-h\"}");
  uint64_t admin = 0;
  EXPECT(prosody_admin_new("{" MOCK "}", &admin, errp_), PROSODY_OK, NULL);
  int state;
  size_t n;
  prosody_event ev[1];
  /* unknown and zero handles */
  EXPECT(prosody_client_consumer_state(0, &state, errp_), PROSODY_ERR_INVALID_HANDLE, "handle 0");
  EXPECT(prosody_client_consumer_state(c + (1 << 8) * 1000, &state, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_complete(0x7fffff03, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  /* wrong kinds */
  EXPECT(prosody_client_poll(admin, ev, 1, sizeof(prosody_event), &n, errp_), PROSODY_ERR_INVALID_HANDLE, "kind admin");
  EXPECT(prosody_event_complete(c, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_event_should_cancel(c, &state, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_event_release(admin, errp_), PROSODY_ERR_INVALID_HANDLE, "kind admin");
  EXPECT(prosody_admin_release(c, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_client_release(admin, NULL, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "kind admin");
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_admin_delete_topic(c, "x", 1, on_done, &w, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_client_send(admin, "t", 1, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, &w, errp_),
         PROSODY_ERR_INVALID_HANDLE, "kind admin");
  waiter_destroy(&w);
  /* released handles, double release; release without a completion */
  EXPECT(prosody_client_release(c, NULL, NULL, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_client_release(c, NULL, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_client_consumer_state(c, &state, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_client_send(c, "t", 1, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, errp_), PROSODY_ERR_INVALID_HANDLE,
         "released");
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  /* handle ids are not reused */
  uint64_t c2 = new_client("{" MOCK "}");
  CHECK(c2 != c && c2 != admin, "reused id");
  release_client(c2);
}

static void test_admin(void) {
  uint64_t admin = 0;
  EXPECT(prosody_admin_new(NULL, &admin, errp_), PROSODY_ERR_INVALID_ARGUMENT, "config_json");
  EXPECT(prosody_admin_new("{" MOCK "}", NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "admin");
  EXPECT(prosody_admin_new("{\"mock\":true,\"bootstrap_servers\":\"\"}", &admin, errp_), PROSODY_ERR_CONFIG,
         "bootstrap_servers");
  EXPECT(prosody_admin_new("{" MOCK "}", &admin, errp_), PROSODY_OK, NULL);
  char topic[64];
  unique(topic, sizeof topic, "admin");
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_admin_create_topic(admin, "{\"name\":\"x\",\"partition_count\":0}", on_done, &w, errp_),
         PROSODY_ERR_CONFIG, "partition_count");
  EXPECT(prosody_admin_create_topic(admin, "{\"partition_count\":1}", on_done, &w, errp_), PROSODY_ERR_CONFIG, "name");
  EXPECT(prosody_admin_create_topic(admin, NULL, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "topic_json");
  EXPECT(prosody_admin_create_topic(admin, "{\"name\":\"x\"}", NULL, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "done");
  EXPECT(prosody_admin_delete_topic(admin, NULL, 1, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "name");
  EXPECT(prosody_admin_delete_topic(admin, "", 0, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT, "name");
  waiter_destroy(&w);
  create_topic(admin, topic, 3);
  create_topic(admin, topic, 3); /* existing: not an error */
  AWAIT(&w, prosody_admin_delete_topic(admin, topic, strlen(topic), on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

/* The event path: notify/eventfd wake-ups, poll, outcomes, misuse. */
static void test_events(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "events");
  unique(group, sizeof group, "events-g");
  uint64_t admin;
  EXPECT(prosody_admin_new("{" MOCK "}", &admin, errp_), PROSODY_OK, NULL);
  create_topic(admin, topic, 2);
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"commit_interval\":\"50ms\","
           "\"retry_base\":\"10ms\",\"max_retry_delay\":\"50ms\"}",
           group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config h = {.size = sizeof(prosody_handler_config), .notify = on_notify, .user_data = &notifies};
  atomic_store(&notifies, 0);
  subscribe(consumer, &h);
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_client_subscribe(consumer, &h, on_done, &w, errp_), PROSODY_ERR_STATE, "already subscribed");
  waiter_destroy(&w);
  int state = -1;
  EXPECT(prosody_client_consumer_state(consumer, &state, errp_), PROSODY_OK, NULL);
  CHECK(state == PROSODY_CONSUMER_RUNNING, "state %d", state);

  enum { N = 20 }; /* below max_concurrency (32): all reach the host at once */
  send_n(sender, topic, N, "k");
  prosody_event ev[N * 2];
  size_t got = collect(consumer, ev, N * 2, N, 20);
  CHECK(got == N, "received %zu of %d", got, N);
  /* The fd becomes readable before notify is called, so the events can be
   * collected while the call is still on its way. */
  for (double until = now_s() + 5; atomic_load(&notifies) < 1 && now_s() < until;) {
    struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  int n_notify = atomic_load(&notifies);
  CHECK(n_notify >= 1 && n_notify <= (int)got, "notifies %d for %zu events", n_notify, got);
  for (size_t i = 0; i < got; i++) {
    prosody_event *e = &ev[i];
    CHECK(e->kind == PROSODY_EVENT_MESSAGE, "kind %d", e->kind);
    CHECK(e->topic_len == strlen(topic) && memcmp(e->topic, topic, e->topic_len) == 0, "topic");
    CHECK(e->key_len >= 3 && memcmp(e->key, "k-", 2) == 0, "key %.*s", (int)e->key_len, e->key);
    CHECK(e->payload_len > 10 && e->payload[0] == '{', "payload");
    CHECK(e->source_system_len == 11 && memcmp(e->source_system, "capi-sender", 11) == 0, "source %.*s",
          (int)e->source_system_len, e->source_system);
    CHECK(e->partition >= 0 && e->partition < 2 && e->offset >= 0 && e->timestamp_ms > 0, "coordinates");
    CHECK((e->event & 0xff) == 3, "event handle kind tag");
  }
  uint32_t parts = 0;
  EXPECT(prosody_client_assigned_partition_count(consumer, &parts, errp_), PROSODY_OK, NULL);
  CHECK(parts == 2, "assigned partitions %u", parts);
  int cancelled = -1;
  EXPECT(prosody_event_should_cancel(ev[0].event, &cancelled, errp_), PROSODY_OK, NULL);
  CHECK(cancelled == 0, "cancelled %d", cancelled);
  EXPECT(prosody_event_should_cancel(ev[0].event, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cancelled");
  /* A client without state_collections has no keyed state. */
  uint64_t sh = 0;
  EXPECT(prosody_event_state(ev[0].event, "v", 1, PROSODY_STATE_VALUE, &sh, errp_), PROSODY_ERR_STATE, "state_collections");

  /* Single completions: a bad outcome leaves the event pending. */
  EXPECT(prosody_event_complete(ev[0].event, 42, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "outcome");
  EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_should_cancel(ev[0].event, &cancelled, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  /* A permanent failure is not retried. */
  EXPECT(prosody_event_complete(ev[1].event, PROSODY_OUTCOME_PERMANENT, "bad data", errp_), PROSODY_OK, NULL);
  /* A transient failure, and a released event, are retried (pipeline mode):
   * the same record comes back under a new handle. */
  int32_t tp = ev[2].partition, rp = ev[3].partition;
  int64_t to = ev[2].offset, ro = ev[3].offset;
  uint64_t th = ev[2].event, rh = ev[3].event;
  EXPECT(prosody_event_complete(ev[2].event, PROSODY_OUTCOME_TRANSIENT, "try again", errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_release(ev[3].event, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_release(ev[3].event, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");

  /* Batch completion: one bad item does not stop the others. */
  prosody_completion done[N];
  size_t nd = 0;
  for (size_t i = 4; i < got; i++) done[nd++] = (prosody_completion){ev[i].event, PROSODY_OUTCOME_OK, NULL};
  done[1].event = ev[0].event; /* already completed; ev[5] stays pending */
  EXPECT(prosody_events_complete(done, nd, sizeof(prosody_completion), errp_), PROSODY_ERR_INVALID_HANDLE, "item 1");
  EXPECT(prosody_event_complete(ev[5].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_events_complete(NULL, 3, sizeof(prosody_completion), errp_), PROSODY_ERR_INVALID_ARGUMENT, "items");
  EXPECT(prosody_events_complete(NULL, 0, sizeof(prosody_completion), errp_), PROSODY_OK, NULL);
  done[0] = (prosody_completion){ev[6].event, 7, NULL};
  EXPECT(prosody_events_complete(done, 1, sizeof(prosody_completion), errp_), PROSODY_ERR_INVALID_ARGUMENT, "outcome");

  /* The two retried records return. */
  prosody_event again[4];
  size_t ng = collect(consumer, again, 4, 2, 20);
  CHECK(ng == 2, "redelivered %zu, want 2", ng);
  for (size_t i = 0; i < ng; i++) {
    int is_t = again[i].partition == tp && again[i].offset == to;
    int is_r = again[i].partition == rp && again[i].offset == ro;
    CHECK(is_t || is_r, "unexpected redelivery %d@%lld", again[i].partition, (long long)again[i].offset);
    CHECK(again[i].event != th && again[i].event != rh, "a retry gets a new handle");
    EXPECT(prosody_event_complete(again[i].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  }

  unsubscribe(consumer);
  EXPECT(prosody_client_consumer_state(consumer, &state, errp_), PROSODY_OK, NULL);
  CHECK(state == PROSODY_CONSUMER_CONFIGURED, "state after unsubscribe %d", state);
  /* After unsubscribe: nothing to poll, nothing to unsubscribe. */
  size_t n = 9;
  EXPECT(prosody_client_poll(consumer, ev, 4, sizeof(prosody_event), &n, errp_), PROSODY_OK, NULL);
  CHECK(n == 0, "poll after unsubscribe: %zu", n);
  waiter_init(&w, 1);
  EXPECT(prosody_client_unsubscribe(consumer, on_done, &w, errp_), PROSODY_ERR_STATE, "not subscribed");
  waiter_destroy(&w);
  EXPECT(prosody_event_complete(ev[7].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");

  /* Subscribing again resumes after the committed offsets: nothing left. */
  subscribe(consumer, &h);
  send_n(sender, topic, 3, "again");
  got = collect(consumer, ev, N, 3, 20);
  CHECK(got == 3, "after resubscribe received %zu, want 3", got);
  for (size_t i = 0; i < got; i++) {
    CHECK(ev[i].key_len > 6 && memcmp(ev[i].key, "again-", 6) == 0, "old record redelivered: %.*s",
          (int)ev[i].key_len, ev[i].key);
    EXPECT(prosody_event_complete(ev[i].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  }

  /* Releasing a client with an event the host still holds: the event dies. */
  send_n(sender, topic, 1, "held");
  got = collect(consumer, ev, N, 1, 20);
  CHECK(got == 1, "held event: %zu", got);
  release_client(consumer);
  if (got == 1) {
    EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE,
           "unknown");
  }
  release_client(sender);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

/* ---- on_event: events handled by direct calls ---- */

typedef struct direct_state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls, timers, bad, retried0, retried3;
  uint64_t last_handle;
  int64_t timer_ms;
  char topic[64];
} direct_state;

static int32_t on_direct(void *user_data, const prosody_event *ev, const char **message) {
  direct_state *st = user_data;
  int bad = 0;
  char *err = NULL;
  int cancelled = -1;
  bad |= prosody_event_should_cancel(ev->event, &cancelled, &err) != PROSODY_OK || cancelled != 0;
  prosody_free(err), err = NULL;
  /* The return value is the outcome: completing or releasing is refused. */
  bad |= prosody_event_complete(ev->event, PROSODY_OUTCOME_OK, NULL, &err) != PROSODY_ERR_STATE ||
         err == NULL || strstr(err, "on_event") == NULL;
  prosody_free(err), err = NULL;
  bad |= prosody_event_release(ev->event, &err) != PROSODY_ERR_STATE;
  prosody_free(err), err = NULL;
  bad |= ev->topic_len != strlen(st->topic) || memcmp(ev->topic, st->topic, ev->topic_len) != 0;
  bad |= ev->key_len < 3 || memcmp(ev->key, "d-", 2) != 0;
  int32_t outcome = PROSODY_OUTCOME_OK;
  char key = ev->key_len == 3 ? ev->key[2] : 'x';
  if (ev->kind == PROSODY_EVENT_TIMER) {
    pthread_mutex_lock(&st->mu);
    bad |= key != '2' || ev->time_ms != st->timer_ms || ev->payload_len != 0;
    st->timers++;
    pthread_mutex_unlock(&st->mu);
  } else {
    bad |= ev->kind != PROSODY_EVENT_MESSAGE || ev->payload_len < 2 || ev->payload[0] != '{';
    if (key == '2') {
      /* A timer operation works while the call lasts: wait for it. */
      waiter w;
      waiter_init(&w, 1);
      bad |= prosody_event_schedule(ev->event, st->timer_ms, on_done, &w, &err) != PROSODY_OK;
      prosody_free(err), err = NULL;
      bad |= waiter_wait(&w, 30) != PROSODY_OK;
      waiter_destroy(&w);
    }
    pthread_mutex_lock(&st->mu);
    if (key == '0' && !st->retried0) {
      st->retried0 = 1;
      *message = "try again";
      outcome = PROSODY_OUTCOME_TRANSIENT;
    } else if (key == '3' && !st->retried3) {
      st->retried3 = 1;
      outcome = 42; /* not an outcome: counts as transient */
    } else if (key == '1') {
      *message = "bad data";
      outcome = PROSODY_OUTCOME_PERMANENT;
    }
    pthread_mutex_unlock(&st->mu);
  }
  pthread_mutex_lock(&st->mu);
  st->bad += bad;
  st->calls++;
  st->last_handle = ev->event;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
  return outcome;
}

static void test_direct(void) {
  char group[64], cfg[512];
  direct_state st = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  unique(st.topic, sizeof st.topic, "direct");
  unique(group, sizeof group, "direct-g");
  st.timer_ms = (now_ms() / 1000 + 3) * 1000;
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"retry_base\":\"10ms\","
           "\"max_retry_delay\":\"50ms\"}",
           group, st.topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config h = {.size = sizeof(prosody_handler_config), .user_data = &st, .on_event = on_direct};
  subscribe(consumer, &h);
  enum { N = 8 };
  send_n(sender, st.topic, N, "d");
  /* N messages, a retry each of d-0 and d-3, and d-2's timer. */
  int want = N + 3;
  pthread_mutex_lock(&st.mu);
  for (double until = now_s() + 30; (st.calls < want || st.timers < 1) && now_s() < until;) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&st.cv, &st.mu, &ts);
  }
  int calls = st.calls, timers = st.timers, bad = st.bad;
  uint64_t last = st.last_handle;
  pthread_mutex_unlock(&st.mu);
  CHECK(calls == want && timers == 1, "on_event calls %d (want %d), timers %d", calls, want, timers);
  CHECK(bad == 0, "%d calls saw a broken contract", bad);
  /* Nothing was queued for polling. */
  prosody_event ev[4];
  size_t n = 9;
  EXPECT(prosody_client_poll(consumer, ev, 4, sizeof(prosody_event), &n, errp_), PROSODY_OK, NULL);
  CHECK(n == 0, "poll in on_event mode returned %zu", n);
  /* A call's handle ends with the call. The callback signalled before it
     returned, so the library may not have ended the last call's handle yet:
     wait for that, for a while. */
  int cancelled;
  for (double until = now_s() + 5; now_s() < until; usleep(1000)) {
    char *err = NULL;
    int st_ = prosody_event_should_cancel(last, &cancelled, &err);
    prosody_free(err);
    if (st_ != PROSODY_OK) break;
  }
  EXPECT(prosody_event_should_cancel(last, &cancelled, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  unsubscribe(consumer);
  /* No more calls after the unsubscribe completed, and no extra ones. */
  pthread_mutex_lock(&st.mu);
  calls = st.calls;
  pthread_mutex_unlock(&st.mu);
  CHECK(calls == want, "on_event calls after unsubscribe: %d, want %d", calls, want);
  release_client(consumer);
  release_client(sender);
}

/* The host's trace context travels in the record's headers and comes back
 * on the consumed event; without one the event's fields are empty. */
static void test_trace_context(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "trace");
  unique(group, sizeof group, "trace-g");
  snprintf(cfg, sizeof cfg, "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\"}", group, topic);
  uint64_t admin;
  EXPECT(prosody_admin_new("{" MOCK "}", &admin, errp_), PROSODY_OK, NULL);
  create_topic(admin, topic, 1);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"trace-sender\"}");
  const char *parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  prosody_trace_context tc = {.size = sizeof(prosody_trace_context), .traceparent = parent, .traceparent_len = strlen(parent),
                              .tracestate = "vendor=x", .tracestate_len = 8, .baggage = "user=alice", .baggage_len = 10};
  waiter w;
  AWAIT(&w, prosody_client_send(sender, topic, strlen(topic), "traced", 6, (const uint8_t *)"{}", 2, &tc, on_done, &w, &err_), 30,
        PROSODY_OK);
  prosody_trace_context invalid = {.size = sizeof(prosody_trace_context), .traceparent = "not-a-traceparent", .traceparent_len = 17};
  AWAIT(&w, prosody_client_send(sender, topic, strlen(topic), "invalid", 7, (const uint8_t *)"{}", 2, &invalid, on_done, &w, &err_),
        30, PROSODY_OK);
  AWAIT(&w, prosody_client_send(sender, topic, strlen(topic), "plain", 5, (const uint8_t *)"{}", 2, NULL, on_done, &w, &err_), 30,
        PROSODY_OK);
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  prosody_event ev[3];
  size_t got = 0;
  for (int i = 0; i < 3; i++) {
    if (next_event(consumer, PROSODY_EVENT_MESSAGE, &ev[got], 20)) got++;
  }
  CHECK(got == 3, "received %zu of 3", got);
  for (size_t i = 0; i < got; i++) {
    prosody_event *e = &ev[i];
    if (e->key_len == 6 && memcmp(e->key, "traced", 6) == 0) {
      CHECK(e->traceparent_len == strlen(parent) && memcmp(e->traceparent, parent, e->traceparent_len) == 0,
            "traceparent %.*s", (int)e->traceparent_len, e->traceparent);
      CHECK(e->tracestate_len == 8 && memcmp(e->tracestate, "vendor=x", 8) == 0, "tracestate %.*s",
            (int)e->tracestate_len, e->tracestate);
      CHECK(e->baggage_len == 10 && memcmp(e->baggage, "user=alice", 10) == 0, "baggage %.*s",
            (int)e->baggage_len, e->baggage);
    } else {
      /* An invalid traceparent is dropped as the W3C propagator does. */
      CHECK(e->traceparent_len == 0 && e->tracestate_len == 0 && e->baggage_len == 0,
            "%.*s: unexpected trace headers", (int)e->key_len, e->key);
    }
    EXPECT(prosody_event_complete(e->event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  }
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

static atomic_long small_ud_sum;
static atomic_int small_ud_calls;
static void on_small_ud(void *user_data, int status, const char *message) {
  if (status != PROSODY_OK) fprintf(stderr, "send failed: %s\n", message);
  atomic_fetch_add(&small_ud_sum, (long)(uintptr_t)user_data);
  atomic_fetch_add(&small_ud_calls, 1);
}

/* Sends started without waiting for each keep their call order: records
 * of one key arrive in the order they were sent. */
static void test_send_order(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "order");
  unique(group, sizeof group, "order-g");
  snprintf(cfg, sizeof cfg, "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\"}", group, topic);
  uint64_t admin;
  EXPECT(prosody_admin_new("{" MOCK "}", &admin, errp_), PROSODY_OK, NULL);
  create_topic(admin, topic, 1);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"order-sender\"}");
  enum { N = 200 };
  /* user_data is a small integer here, as hosts often pass: the library
   * must carry it as an integer, never as a pointer the Go runtime checks. */
  atomic_store(&small_ud_sum, 0);
  atomic_store(&small_ud_calls, 0);
  for (int i = 0; i < N; i++) {
    char payload[64];
    int len = snprintf(payload, sizeof payload, "{\"i\":%d}", i);
    EXPECT(prosody_client_send(sender, topic, strlen(topic), "one-key", 7, (const uint8_t *)payload, (size_t)len, NULL, on_small_ud,
                               (void *)(uintptr_t)(i + 1), errp_),
           PROSODY_OK, NULL);
  }
  for (int i = 0; i < 3000 && atomic_load(&small_ud_calls) < N; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(atomic_load(&small_ud_calls) == N, "%d of %d sends completed", atomic_load(&small_ud_calls), N);
  CHECK(atomic_load(&small_ud_sum) == N * (N + 1) / 2, "user_data values corrupted: sum %ld",
        (long)atomic_load(&small_ud_sum));
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  int next = 0;
  for (int i = 0; i < N; i++) {
    prosody_event ev;
    if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &ev, 20)) break;
    int got = -1;
    sscanf((const char *)ev.payload, "{\"i\":%d}", &got);
    CHECK(got == next, "record %d arrived where %d was expected", got, next);
    next = got + 1;
    EXPECT(prosody_event_complete(ev.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  }
  CHECK(next == N, "received %d of %d in order", next, N);
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

/* A handler timeout reaches the host as a CANCELLED notice; the host's
 * outcome still decides. */
static void test_cancellation(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "cancel");
  unique(group, sizeof group, "cancel-g");
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"timeout\":\"300ms\"}", group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  send_n(sender, topic, 1, "slow");
  prosody_event ev[4];
  size_t got = collect(consumer, ev, 4, 1, 20);
  CHECK(got == 1 && ev[0].kind == PROSODY_EVENT_MESSAGE, "got %zu", got);
  if (got == 1) {
    /* The host never completes it: past the timeout the library gives up
     * on it (EXPIRED), counts the attempt as a transient failure and
     * retries the record under a new handle (pipeline mode). */
    /* On a loaded machine the retry can already be waiting behind the
     * notice when the host polls: then it is the poll's second event. */
    prosody_event notice[4];
    size_t n = collect(consumer, notice, 4, 1, 10);
    CHECK((n == 1 || n == 2) && notice[0].kind == PROSODY_EVENT_EXPIRED && notice[0].event == ev[0].event,
          "expiry notice: n=%zu kind=%d", n, n ? notice[0].kind : -1);
    CHECK(n >= 1 && notice[0].topic == NULL && notice[0].payload_len == 0 && notice[0].size == sizeof(prosody_event),
          "notice carries no data");
    int cancelled = 0;
    EXPECT(prosody_event_should_cancel(ev[0].event, &cancelled, errp_), PROSODY_OK, NULL);
    CHECK(cancelled == 1, "should_cancel %d", cancelled);
    /* the event data stays valid until the host lets go of it */
    CHECK(ev[0].key_len == 6 && memcmp(ev[0].key, "slow-0", 6) == 0, "key after expiry");
    prosody_event retry[4];
    if (n == 2) {
      retry[0] = notice[1];
      n = 1;
    } else {
      n = collect(consumer, retry, 4, 1, 20);
    }
    CHECK(n == 1 && retry[0].kind == PROSODY_EVENT_MESSAGE && retry[0].event != ev[0].event &&
              retry[0].offset == ev[0].offset,
          "retry of the expired attempt: n=%zu", n);
    /* The late completion is accepted and ignored. */
    EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
    if (n == 1) EXPECT(prosody_event_complete(retry[0].event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  }
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
}

/* What crosses the boundary arrives exactly or is refused at once: keys with
 * NUL bytes, topic names Kafka refuses, struct sizes, timer times. */
static void test_boundary(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "boundary");
  unique(group, sizeof group, "boundary-g");
  snprintf(cfg, sizeof cfg, "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\"}", group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");

  /* Topic names Kafka refuses never reach it, NUL included. */
  const char *bad_topics[] = {"t\0other", "a b", "", ".", ".."};
  const size_t bad_lens[] = {7, 3, 0, 1, 2};
  for (size_t i = 0; i < 5; i++) {
    EXPECT(prosody_client_send(sender, bad_topics[i], bad_lens[i], "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL,
                               errp_),
           PROSODY_ERR_INVALID_ARGUMENT, "topic");
  }
  char long_topic[251];
  memset(long_topic, 'a', 250);
  long_topic[250] = 0;
  EXPECT(prosody_client_send(sender, long_topic, 250, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "249");
  EXPECT(prosody_client_send(sender, topic, strlen(topic), "\xff", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL,
                             errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "UTF-8");
  prosody_trace_context unsized = {0};
  EXPECT(prosody_client_send(sender, topic, strlen(topic), "k", 1, (const uint8_t *)"{}", 2, &unsized, on_done, NULL,
                             errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "sizeof(prosody_trace_context)");
  prosody_handler_config zero = {0};
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_client_subscribe(consumer, &zero, on_done, &w, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "sizeof(prosody_handler_config)");
  waiter_destroy(&w);

  /* A key with a NUL byte arrives byte for byte. */
  static const char key[] = "user-1\0admin";
  waiter_init(&w, 1);
  EXPECT(prosody_client_send(sender, topic, strlen(topic), key, sizeof key - 1, (const uint8_t *)"{\"a\":1}", 7, NULL,
                             on_done, &w, errp_),
         PROSODY_OK, NULL);
  CHECK(waiter_wait(&w, 30) == PROSODY_OK, "send: %s", w.message);
  waiter_destroy(&w);
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  prosody_event ev[2];
  size_t n = 0;
  EXPECT(prosody_client_poll(consumer, ev, 2, 8, &n, errp_), PROSODY_ERR_INVALID_ARGUMENT, "event_size");
  size_t got = collect(consumer, ev, 2, 1, 20);
  CHECK(got == 1 && ev[0].key_len == sizeof key - 1 && memcmp(ev[0].key, key, sizeof key - 1) == 0,
        "key arrived as %zu bytes", got ? ev[0].key_len : 0);
  if (got == 1) {
    /* Timer times the store cannot hold are refused, not clamped. */
    EXPECT(prosody_event_schedule(ev[0].event, (int64_t)4294967296LL * 1000, on_done, NULL, errp_),
           PROSODY_ERR_INVALID_ARGUMENT, "out of range");
    EXPECT(prosody_event_schedule(ev[0].event, -1000, on_done, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT,
           "out of range");
    EXPECT(prosody_event_clear_and_schedule(ev[0].event, (int64_t)1e15, on_done, NULL, errp_),
           PROSODY_ERR_INVALID_ARGUMENT, "out of range");
    prosody_completion c = {ev[0].event, PROSODY_OUTCOME_OK, NULL};
    EXPECT(prosody_events_complete(&c, 1, 4, errp_), PROSODY_ERR_INVALID_ARGUMENT, "item_size");
    /* Aborted (the host is stopping): no retry, no commit. */
    c.outcome = PROSODY_OUTCOME_ABORT;
    EXPECT(prosody_events_complete(&c, 1, sizeof c, errp_), PROSODY_OK, NULL);
  }

  /* The option schema. */
  char *schema = NULL;
  EXPECT(prosody_config_schema(&schema, errp_), PROSODY_OK, NULL);
  CHECK(schema != NULL && strstr(schema, "\"max_concurrency\"") != NULL && strstr(schema, "\"options\"") != NULL,
        "schema %.80s", schema ? schema : "(null)");
  prosody_free(schema);
  EXPECT(prosody_config_schema(NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "schema_json");

  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
}

/* Unsubscribing while the host holds an event: the event is cancelled and
 * the unsubscribe waits for the host's completion. */
static void test_unsubscribe_in_flight(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "drain");
  unique(group, sizeof group, "drain-g");
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"shutdown_timeout\":\"1s\"}", group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  send_n(sender, topic, 1, "inflight");
  prosody_event ev[4];
  size_t got = collect(consumer, ev, 4, 1, 20);
  CHECK(got == 1, "got %zu", got);
  waiter w;
  waiter_init(&w, 1);
  EXPECT(prosody_client_unsubscribe(consumer, on_done, &w, errp_), PROSODY_OK, NULL);
  if (got == 1) {
    prosody_event notice[4];
    size_t n = collect(consumer, notice, 4, 1, 10);
    CHECK(n == 1 && notice[0].kind == PROSODY_EVENT_CANCELLED, "notice on unsubscribe: %zu", n);
    CHECK(waiter_wait(&w, 0.3) == -1, "unsubscribe finished before the event was completed");
    EXPECT(prosody_event_complete(ev[0].event, PROSODY_OUTCOME_TRANSIENT, "interrupted", errp_), PROSODY_OK, NULL);
  }
  int st = waiter_wait(&w, 30);
  CHECK(st == PROSODY_OK, "unsubscribe: %d %s", st, w.message);
  waiter_destroy(&w);
  release_client(consumer);
  release_client(sender);
}

/* Timer operations from a message handler, then the TIMER events they
 * cause, which schedule a follow-up in turn (mock mode: in-memory timers). */
static void test_timers(void) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "timers");
  unique(group, sizeof group, "timers-g");
  snprintf(cfg, sizeof cfg, "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\"}", group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  send_n(sender, topic, 1, "tk");
  prosody_event m;
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &m, 20)) goto out;
  uint64_t e = m.event;
  waiter w;

  /* Misuse: no callback, wrong handles. */
  EXPECT(prosody_event_schedule(e, 0, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_event_clear_and_schedule(e, 0, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_event_unschedule(e, 0, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_event_clear_scheduled(e, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_event_scheduled(e, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_event_schedule(consumer, 0, on_done, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_event_scheduled(0, on_times, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "handle 0");

  /* The first timer: two to three seconds ahead, on a whole second. */
  int64_t t1 = (now_ms() / 1000 + 3) * 1000, far = t1 + 3600 * 1000;
  EXPECT_NO_TIMES(e);
  AWAIT(&w, prosody_event_schedule(e, t1, on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT_TIMES(e, t1);
  /* Whole seconds, half up: far+600 is far+1s, far+400 is far. */
  AWAIT(&w, prosody_event_schedule(e, far + 600, on_done, &w, &err_), 30, PROSODY_OK);
  AWAIT(&w, prosody_event_schedule(e, far + 400, on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT_TIMES(e, t1, far, far + 1000);
  AWAIT(&w, prosody_event_unschedule(e, far + 1000, on_done, &w, &err_), 30, PROSODY_OK);
  AWAIT(&w, prosody_event_unschedule(e, far + 7000, on_done, &w, &err_), 30, PROSODY_OK); /* none there */
  EXPECT_TIMES(e, t1, far);
  AWAIT(&w, prosody_event_clear_and_schedule(e, far, on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT_TIMES(e, far);
  AWAIT(&w, prosody_event_clear_scheduled(e, on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT_NO_TIMES(e);
  /* Operations of one event run in call order: no waiting in between. */
  waiter_init(&w, 3);
  EXPECT(prosody_event_schedule(e, far, on_done, &w, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_clear_scheduled(e, on_done, &w, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_schedule(e, t1, on_done, &w, errp_), PROSODY_OK, NULL);
  CHECK(waiter_wait(&w, 30) == PROSODY_OK, "queued operations: %s", w.message);
  waiter_destroy(&w);
  EXPECT_TIMES(e, t1);

  EXPECT(prosody_event_complete(e, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  /* A completed event takes no timer operations. */
  waiter_init(&w, 1);
  EXPECT(prosody_event_schedule(e, t1, on_done, &w, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_clear_and_schedule(e, t1, on_done, &w, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_unschedule(e, t1, on_done, &w, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_clear_scheduled(e, on_done, &w, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  EXPECT(prosody_event_scheduled(e, on_times, NULL, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  waiter_destroy(&w);

  /* The timer fires as a TIMER event of the same key. */
  prosody_event t;
  if (!next_event(consumer, PROSODY_EVENT_TIMER, &t, 20)) goto out;
  CHECK(now_ms() >= t1 - 500, "timer fired %lld ms early", (long long)(t1 - now_ms()));
  CHECK(t.time_ms == t1, "time_ms %lld, want %lld", (long long)t.time_ms, (long long)t1);
  CHECK(t.key_len == 4 && memcmp(t.key, "tk-0", 4) == 0, "timer key %.*s", (int)t.key_len, t.key);
  CHECK(t.topic_len == strlen(topic) && memcmp(t.topic, topic, t.topic_len) == 0, "timer topic");
  CHECK(t.partition == m.partition && t.offset == 0 && t.payload_len == 0, "timer coordinates");
  CHECK((t.event & 0xff) == 3, "timer handle kind tag");
  /* A timer handler schedules a follow-up; the firing timer is not listed. */
  EXPECT_NO_TIMES(t.event);
  int64_t t2 = t1 + 1000;
  AWAIT(&w, prosody_event_schedule(t.event, t2, on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT_TIMES(t.event, t2);
  EXPECT(prosody_event_complete(t.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  if (!next_event(consumer, PROSODY_EVENT_TIMER, &t, 20)) goto out;
  CHECK(t.time_ms == t2, "follow-up time_ms %lld, want %lld", (long long)t.time_ms, (long long)t2);
  EXPECT_NO_TIMES(t.event);
  /* Operations still queued when the event is completed fail as PERMANENT
   * (or ran before it): never a crash, never a lost callback. */
  times_result r[3] = {0};
  for (int i = 0; i < 3; i++) {
    waiter_init(&r[i].w, 1);
    EXPECT(prosody_event_scheduled(t.event, on_times, &r[i], errp_), PROSODY_OK, NULL);
  }
  EXPECT(prosody_event_complete(t.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  for (int i = 0; i < 3; i++) {
    int st = waiter_wait(&r[i].w, 30);
    CHECK(st == PROSODY_OK || (st == PROSODY_ERR_PERMANENT && strstr(r[i].w.message, "no longer valid")),
          "operation racing completion: %s %s", prosody_status_name(st), r[i].w.message);
    CHECK(!r[i].bad, "times callback contract");
    waiter_destroy(&r[i].w);
  }
out:
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
}

/* Timer operations of a cancelled event fail with the cancellation's class:
 * TRANSIENT after a timeout, TERMINAL when the consumer stops. */
static void test_timers_cancelled(void) {
  for (int stop = 0; stop <= 1; stop++) {
    char topic[64], group[64], cfg[512];
    unique(topic, sizeof topic, "tcancel");
    unique(group, sizeof group, "tcancel-g");
    snprintf(cfg, sizeof cfg, "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"timeout\":\"%s\","
             "\"shutdown_timeout\":\"1s\"}",
             group, topic, stop ? "1m" : "300ms");
    uint64_t consumer = new_client(cfg);
    uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
    prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
    subscribe(consumer, &h);
    send_n(sender, topic, 1, "tc");
    prosody_event m, notice;
    waiter w, u;
    waiter_init(&u, 1);
    if (next_event(consumer, PROSODY_EVENT_MESSAGE, &m, 20)) {
      /* Unsubscribing cancels the held event as a revocation does. */
      if (stop) EXPECT(prosody_client_unsubscribe(consumer, on_done, &u, errp_), PROSODY_OK, NULL);
      /* A timeout ends the attempt (EXPIRED): its context is no longer
       * valid. A revocation only cancels it: the partition is going away. */
      if (next_event(consumer, stop ? PROSODY_EVENT_CANCELLED : PROSODY_EVENT_EXPIRED, &notice, 20)) {
        int64_t at = now_ms() + 3600 * 1000;
        AWAIT(&w, prosody_event_schedule(m.event, at, on_done, &w, &err_), 30,
              stop ? PROSODY_ERR_TERMINAL : PROSODY_ERR_PERMANENT);
      }
      EXPECT(prosody_event_complete(m.event, PROSODY_OUTCOME_TRANSIENT, "interrupted", errp_), PROSODY_OK, NULL);
    }
    if (stop) {
      CHECK(waiter_wait(&u, 30) == PROSODY_OK, "unsubscribe: %s", u.message);
    } else {
      unsubscribe(consumer);
    }
    waiter_destroy(&u);
    release_client(consumer);
    release_client(sender);
  }
}

/* ---- keyed state ---- */

/* One item a prosody_state_fn reported, copied (NUL-terminated for
 * convenience); key or value NULL where the library passed NULL. */
typedef struct st_item {
  char *key, *value;
  size_t key_len, value_len;
} st_item;

/* The report of one state operation or cursor chunk. */
typedef struct st_res {
  waiter w;
  st_item *items;
  size_t n;
  uint64_t number;
  int calls; /* the callback ran this many times (must be 1) */
  int bad;   /* the report broke the contract */
  int seq;   /* the order of the report among all reports */
} st_res;

static atomic_int st_seq;

static char *copy_bytes(const void *p, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, p, n);
  s[n] = 0;
  return s;
}

static void on_state(void *user_data, int status, const prosody_state_item *items, size_t n, uint64_t number,
                     const char *message) {
  st_res *r = user_data;
  pthread_mutex_lock(&r->w.mu);
  r->calls++;
  r->bad |= (status == PROSODY_OK) != (message == NULL);
  r->bad |= (n > 0) != (items != NULL);
  r->bad |= status != PROSODY_OK && (n != 0 || number != 0);
  if (r->calls == 1) {
    r->items = calloc(n ? n : 1, sizeof *r->items);
    for (size_t i = 0; i < n; i++) {
      const prosody_state_item *it = &items[i];
      r->bad |= (it->key == NULL && it->key_len != 0) || (it->value == NULL && it->value_len != 0);
      if (it->key) r->items[i].key = copy_bytes(it->key, it->key_len), r->items[i].key_len = it->key_len;
      if (it->value) r->items[i].value = copy_bytes(it->value, it->value_len), r->items[i].value_len = it->value_len;
    }
    r->n = n;
    r->number = number;
    r->seq = atomic_fetch_add(&st_seq, 1);
    r->w.status = status;
    snprintf(r->w.message, sizeof r->w.message, "%s", message ? message : "");
  }
  r->w.pending--;
  pthread_cond_broadcast(&r->w.cv);
  pthread_mutex_unlock(&r->w.mu);
}

static void st_init(st_res *r) {
  memset(r, 0, sizeof *r);
  waiter_init(&r->w, 1);
}

static void st_items_free(st_item *items, size_t n) {
  for (size_t i = 0; i < n; i++) free(items[i].key), free(items[i].value);
  free(items);
}

static void st_free(st_res *r) {
  st_items_free(r->items, r->n);
  r->items = NULL;
  waiter_destroy(&r->w);
}

/* Waits for r's report and checks that it came exactly once, kept the
 * contract and has status want (and, failing, a message with substr). */
static int st_wait(int line, st_res *r, int want, const char *substr) {
  int st = waiter_wait(&r->w, 30);
  if (st != want) {
    fprintf(stderr, "line %d: state operation reported %s, want %s (%s)\n", line,
            st < 0 ? "TIMEOUT" : prosody_status_name(st), prosody_status_name(want), r->w.message);
    failures++;
  } else if (want != PROSODY_OK && substr && strstr(r->w.message, substr) == NULL) {
    fprintf(stderr, "line %d: message \"%s\" does not mention \"%s\"\n", line, r->w.message, substr);
    failures++;
  }
  if (r->calls != 1 || r->bad) {
    fprintf(stderr, "line %d: report called %d times, contract broken: %d\n", line, r->calls, r->bad);
    failures++;
  }
  return st;
}

static prosody_state_args sa(void) { return (prosody_state_args){.size = sizeof(prosody_state_args)}; }
static prosody_state_args sa_key(const char *k) {
  prosody_state_args a = sa();
  a.key = k, a.key_len = strlen(k);
  return a;
}
static prosody_state_args sa_val(const char *v) {
  prosody_state_args a = sa();
  a.value = (const uint8_t *)v, a.value_len = strlen(v);
  return a;
}
static prosody_state_args sa_kv(const char *k, const char *v) {
  prosody_state_args a = sa_key(k);
  a.value = (const uint8_t *)v, a.value_len = strlen(v);
  return a;
}
static prosody_state_args sa_index(uint64_t i) {
  prosody_state_args a = sa();
  a.index = i;
  return a;
}

/* Runs op on state handle h, or on reader h for user key rkey (when not
 * NULL), and waits for its report in r (st_free it); returns the status
 * reported, or -2 when the call itself failed. */
static int st_run_on(int line, uint64_t h, const char *rkey, int op, prosody_state_args a, st_res *r, int want,
                     const char *substr) {
  st_init(r);
  char *err = NULL;
  int st = rkey ? prosody_reader_call(h, rkey, strlen(rkey), op, &a, on_state, r, &err)
                : prosody_state_call(h, op, &a, on_state, r, &err);
  if (st != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_state_call(op %d) = %s (%s)\n", line, op, prosody_status_name(st), err ? err : "");
    prosody_free(err);
    failures++;
    return -2;
  }
  return st_wait(line, r, want, substr);
}

static int st_run(int line, uint64_t h, int op, prosody_state_args a, st_res *r, int want, const char *substr) {
  return st_run_on(line, h, NULL, op, a, r, want, substr);
}

/* The operation reports status want (and, failing, substr). */
#define RD_STATUS(h, rkey, op, args, want, substr)                                                 \
  do {                                                                                             \
    st_res r_;                                                                                     \
    st_run_on(__LINE__, (h), (rkey), (op), (args), &r_, (want), (substr));                         \
    st_free(&r_);                                                                                  \
  } while (0)
#define ST_STATUS(h, op, args, want, substr) RD_STATUS(h, NULL, op, args, want, substr)
#define ST_OK(h, op, args) ST_STATUS(h, op, args, PROSODY_OK, NULL)

/* The operation succeeds with exactly one item whose value is want (and,
 * for keyed items, whose key is key), or with none when want is NULL. */
#define ST_ITEM(h, op, args, key, want) st_item_is(__LINE__, (h), NULL, (op), (args), (key), (want))
#define RD_ITEM(h, rkey, op, args, key, want) st_item_is(__LINE__, (h), (rkey), (op), (args), (key), (want))
static void st_item_is(int line, uint64_t h, const char *rkey, int op, prosody_state_args a, const char *key,
                       const char *want) {
  st_res r;
  if (st_run_on(line, h, rkey, op, a, &r, PROSODY_OK, NULL) == PROSODY_OK) {
    int ok = want == NULL ? r.n == 0 : r.n == 1 && r.items[0].value && strcmp(r.items[0].value, want) == 0;
    if (ok && want != NULL) ok = key == NULL ? r.items[0].key == NULL : r.items[0].key && strcmp(r.items[0].key, key) == 0;
    if (!ok || r.number != 0) {
      fprintf(stderr, "line %d: op %d reported n=%zu key=%s value=%s number=%llu, want key=%s value=%s\n", line, op, r.n,
              r.n && r.items[0].key ? r.items[0].key : "(null)", r.n && r.items[0].value ? r.items[0].value : "(null)",
              (unsigned long long)r.number, key ? key : "(null)", want ? want : "(none)");
      failures++;
    }
  }
  st_free(&r);
}

/* The operation succeeds with no items and number want. */
#define ST_NUMBER(h, op, args, want) st_number_is(__LINE__, (h), NULL, (op), (args), (want))
#define RD_NUMBER(h, rkey, op, args, want) st_number_is(__LINE__, (h), (rkey), (op), (args), (want))
static void st_number_is(int line, uint64_t h, const char *rkey, int op, prosody_state_args a, uint64_t want) {
  st_res r;
  if (st_run_on(line, h, rkey, op, a, &r, PROSODY_OK, NULL) == PROSODY_OK && (r.n != 0 || r.number != want)) {
    fprintf(stderr, "line %d: op %d reported n=%zu number=%llu, want number %llu\n", line, op, r.n,
            (unsigned long long)r.number, (unsigned long long)want);
    failures++;
  }
  st_free(&r);
}

static uint64_t st_open(int line, uint64_t ev, const char *name, int kind) {
  uint64_t h = 0;
  char *err = NULL;
  int st = prosody_event_state(ev, name, strlen(name), kind, &h, &err);
  if (st != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_event_state(%s) = %s (%s)\n", line, name, prosody_status_name(st), err ? err : "");
    failures++;
  }
  CHECK((h & 0xff) == 4 || st != PROSODY_OK, "state handle kind tag %#llx", (unsigned long long)h);
  prosody_free(err);
  return h;
}
#define ST_OPEN(ev, name, kind) st_open(__LINE__, (ev), (name), (kind))

static void st_release(uint64_t h) { EXPECT(prosody_state_release(h, errp_), PROSODY_OK, NULL); }

/* Reads a scan to its end; *items gets every item (st_items_free them).
 * Every chunk but the last (empty) one holds 1..256 items. Returns the
 * status of the first chunk that failed, else OK. */
static int st_drain(int line, uint64_t cursor, st_item **items, size_t *n, size_t *chunks) {
  *items = NULL, *n = 0, *chunks = 0;
  for (;;) {
    st_res r;
    st_init(&r);
    char *err = NULL;
    int st = prosody_cursor_next(cursor, on_state, &r, &err);
    if (st != PROSODY_OK) {
      fprintf(stderr, "line %d: prosody_cursor_next = %s (%s)\n", line, prosody_status_name(st), err ? err : "");
      prosody_free(err);
      failures++;
      waiter_destroy(&r.w);
      return st;
    }
    st = waiter_wait(&r.w, 30);
    if (st != PROSODY_OK || r.calls != 1 || r.bad || r.n > 256) {
      if (st == PROSODY_OK) {
        fprintf(stderr, "line %d: chunk of %zu items, reported %d times, contract broken: %d\n", line, r.n, r.calls, r.bad);
        failures++;
      }
      st_free(&r);
      return st < 0 ? -1 : st == PROSODY_OK ? PROSODY_ERR_INTERNAL : st;
    }
    if (r.n == 0) {
      st_free(&r);
      return PROSODY_OK;
    }
    (*chunks)++;
    *items = realloc(*items, (*n + r.n) * sizeof **items);
    memcpy(*items + *n, r.items, r.n * sizeof *r.items);
    *n += r.n;
    free(r.items);
    r.items = NULL, r.n = 0;
    st_free(&r);
  }
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c != 0 ? c : (an > bn) - (an < bn);
}

/* Reads map cursor cur (direction dir) to its end and checks that it
 * holds exactly the keys want[0..n) (given in ascending order), in order,
 * with values "<key>!" (or none, keys_only); then releases it. */
static void st_check_map(int line, uint64_t cur, int dir, int keys_only, char **want, size_t n) {
  CHECK((cur & 0xff) == 5, "cursor handle kind tag %#llx", (unsigned long long)cur);
  st_item *items;
  size_t got, chunks;
  int st = st_drain(line, cur, &items, &got, &chunks);
  if (st == PROSODY_OK) {
    int bad = got != n || (n > 256 && chunks < 2);
    for (size_t i = 0; !bad && i < got; i++) {
      const char *k = want[dir == PROSODY_STATE_FORWARD ? i : n - 1 - i];
      char v[64];
      snprintf(v, sizeof v, "\"%s!\"", k);
      bad |= items[i].key == NULL || strcmp(items[i].key, k) != 0;
      bad |= keys_only ? items[i].value != NULL : items[i].value == NULL || strcmp(items[i].value, v) != 0;
      if (i > 0) {
        int c = bytes_cmp(items[i - 1].key, items[i - 1].key_len, items[i].key, items[i].key_len);
        bad |= dir == PROSODY_STATE_FORWARD ? c >= 0 : c <= 0; /* ordered and distinct */
      }
      if (bad) fprintf(stderr, "line %d: item %zu: key %s value %s, want key %s\n", line, i, items[i].key ? items[i].key : "(null)",
                       items[i].value ? items[i].value : "(null)", k);
    }
    if (bad) {
      fprintf(stderr, "line %d: map scan (dir %d, keys_only %d): %zu items in %zu chunks, want %zu\n", line, dir, keys_only,
              got, chunks, n);
      failures++;
    }
  } else {
    fprintf(stderr, "line %d: map scan failed: %s\n", line, prosody_status_name(st));
    failures++;
  }
  st_items_free(items, got);
  EXPECT(prosody_cursor_release(cur, errp_), PROSODY_OK, NULL);
}

/* Scans map h as st_check_map checks. */
static void st_scan_map(int line, uint64_t h, int dir, int keys_only, char **want, size_t n) {
  uint64_t cur = 0;
  char *err = NULL;
  int st = prosody_state_scan(h, dir, keys_only, &cur, &err);
  if (st != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_state_scan = %s (%s)\n", line, prosody_status_name(st), err ? err : "");
    prosody_free(err);
    failures++;
    return;
  }
  st_check_map(line, cur, dir, keys_only, want, n);
}

/* Reads deque cursor cur to its end and checks that it holds the numbers
 * from..to (from first when forward), as JSON numbers; then releases it. */
static void st_check_deque(int line, uint64_t cur, int dir, int from, int to) {
  st_item *items;
  size_t got, chunks;
  int st = st_drain(line, cur, &items, &got, &chunks);
  size_t n = (size_t)(to - from + 1);
  int bad = st != PROSODY_OK || got != n || (n > 256 && chunks < 2);
  for (size_t i = 0; !bad && i < got; i++) {
    int want = dir == PROSODY_STATE_FORWARD ? from + (int)i : to - (int)i;
    bad |= items[i].key != NULL || items[i].value == NULL || atoi(items[i].value) != want;
  }
  if (bad) {
    fprintf(stderr, "line %d: deque scan (dir %d): %s, %zu items in %zu chunks, want %d..%d\n", line, dir,
            prosody_status_name(st), got, chunks, from, to);
    failures++;
  }
  st_items_free(items, got);
  EXPECT(prosody_cursor_release(cur, errp_), PROSODY_OK, NULL);
}

/* Scans deque h as st_check_deque checks. */
static void st_scan_deque(int line, uint64_t h, int dir, int from, int to) {
  uint64_t cur = 0;
  EXPECT(prosody_state_scan(h, dir, 0, &cur, errp_), PROSODY_OK, NULL);
  st_check_deque(line, cur, dir, from, to);
}

#define STATE_COLLECTIONS                                                                          \
  "\"state_collections\":["                                                                        \
  "{\"name\":\"v\",\"kind\":\"value\",\"payload\":\"json\"},"                                      \
  "{\"name\":\"m\",\"kind\":\"map\",\"payload\":\"json\"},"                                        \
  "{\"name\":\"big\",\"kind\":\"map\",\"payload\":\"json\"},"                                      \
  "{\"name\":\"d\",\"kind\":\"deque\",\"payload\":\"json\",\"capacity\":3},"                      \
  "{\"name\":\"q\",\"kind\":\"deque\",\"payload\":\"json\"},"                                      \
  "{\"name\":\"msgs\",\"kind\":\"deque\",\"payload\":\"message\"}]"

enum { BIG = 300 };

/* Keyed state through a polling host: every operation, staged writes and
 * what the outcome does with them, scans, and misuse. */
static void test_state(void) {
  char topic[64], group[64], cfg[1024];
  unique(topic, sizeof topic, "state");
  unique(group, sizeof group, "state-g");
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"retry_base\":\"10ms\","
           "\"max_retry_delay\":\"50ms\"," STATE_COLLECTIONS "}",
           group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config hc = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &hc);
  /* Three messages of one key: its events come one after another. */
  for (int i = 0; i < 3; i++) send_one(sender, topic, "sk");
  char *big[BIG + 1];
  for (int i = 0; i < BIG; i++) {
    big[i] = malloc(8);
    snprintf(big[i], 8, "k%03d", i);
  }
  big[BIG] = NULL;
  uint64_t h = 0, cur = 0;
  prosody_event e1, e2, e2r, e3;

  /* ---- event 1: misuse, every operation, staged writes ---- */
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e1, 20)) goto out;
  EXPECT(prosody_event_state(e1.event, "v", 1, PROSODY_STATE_VALUE, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "state");
  EXPECT(prosody_event_state(e1.event, "v", 1, 9, &h, errp_), PROSODY_ERR_INVALID_ARGUMENT, "kind");
  EXPECT(prosody_event_state(e1.event, NULL, 1, PROSODY_STATE_VALUE, &h, errp_), PROSODY_ERR_INVALID_ARGUMENT, "name");
  EXPECT(prosody_event_state(e1.event, "nope", 4, PROSODY_STATE_VALUE, &h, errp_), PROSODY_ERR_PERMANENT, "not registered");
  EXPECT(prosody_event_state(e1.event, "v", 1, PROSODY_STATE_MAP, &h, errp_), PROSODY_ERR_PERMANENT, "is a value");
  EXPECT(prosody_event_state(0, "v", 1, PROSODY_STATE_VALUE, &h, errp_), PROSODY_ERR_INVALID_HANDLE, "handle 0");
  EXPECT(prosody_event_state(consumer, "v", 1, PROSODY_STATE_VALUE, &h, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");

  uint64_t v = ST_OPEN(e1.event, "v", PROSODY_STATE_VALUE);
  uint64_t m = ST_OPEN(e1.event, "m", PROSODY_STATE_MAP);
  uint64_t d = ST_OPEN(e1.event, "d", PROSODY_STATE_DEQUE);
  uint64_t q = ST_OPEN(e1.event, "q", PROSODY_STATE_DEQUE);
  uint64_t bm = ST_OPEN(e1.event, "big", PROSODY_STATE_MAP);
  uint64_t msgs = ST_OPEN(e1.event, "msgs", PROSODY_STATE_DEQUE);

  /* Arguments are checked at once; cb is then not called. */
  prosody_state_args a = sa_val("1");
  st_res r;
  st_init(&r);
  EXPECT(prosody_state_call(v, PROSODY_STATE_GET, &a, NULL, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_state_call(v, PROSODY_STATE_GET, NULL, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "args");
  EXPECT(prosody_state_call(v, PROSODY_STATE_PUSH_BACK, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "PROSODY_STATE_PUSH_BACK is not an operation of a value");
  EXPECT(prosody_state_call(m, PROSODY_STATE_LEN, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "of a map");
  EXPECT(prosody_state_call(d, PROSODY_STATE_SET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "of a deque");
  EXPECT(prosody_state_call(v, 999, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "unknown operation");
  EXPECT(prosody_state_call(v, 0, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "unknown operation");
  prosody_state_args none = sa();
  EXPECT(prosody_state_call(v, PROSODY_STATE_SET, &none, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "value");
  EXPECT(prosody_state_call(m, PROSODY_STATE_GET, &none, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "key");
  prosody_state_args only_key = sa_key("a");
  EXPECT(prosody_state_call(m, PROSODY_STATE_SET, &only_key, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "value");
  EXPECT(prosody_state_call(d, PROSODY_STATE_PUSH_BACK, &none, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "value");
  prosody_state_args bad_key = sa_key("\xff\xfe");
  EXPECT(prosody_state_call(m, PROSODY_STATE_GET, &bad_key, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "UTF-8");
  prosody_state_args null_key = sa();
  null_key.key_len = 3;
  null_key.key = NULL;
  EXPECT(prosody_state_call(m, PROSODY_STATE_GET, &null_key, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "key");
  prosody_state_args many_null = sa();
  many_null.keys_len = 2;
  EXPECT(prosody_state_call(m, PROSODY_STATE_GET_MANY, &many_null, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "keys");
  prosody_state_item nokey[1] = {{0}};
  many_null.keys = nokey, many_null.keys_len = 1;
  EXPECT(prosody_state_call(m, PROSODY_STATE_GET_MANY, &many_null, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "keys[0].key");
  prosody_state_args small = sa();
  small.size = 0;
  EXPECT(prosody_state_call(v, PROSODY_STATE_GET, &small, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "size");
  EXPECT(prosody_state_call(0, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "handle 0");
  EXPECT(prosody_state_call(e1.event, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "kind event");
  uint64_t c0 = 0;
  EXPECT(prosody_state_scan(m, 7, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "forward");
  EXPECT(prosody_state_scan(m, -1, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "backward");
  EXPECT(prosody_state_scan(m, PROSODY_STATE_FORWARD, 0, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cursor");
  EXPECT(prosody_state_scan(v, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "value");
  EXPECT(prosody_state_scan(consumer, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  EXPECT(prosody_cursor_next(m, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "kind state");
  EXPECT(prosody_cursor_release(m, errp_), PROSODY_ERR_INVALID_HANDLE, "kind state");
  EXPECT(prosody_state_release(e1.event, errp_), PROSODY_ERR_INVALID_HANDLE, "kind event");
  CHECK(r.calls == 0, "a refused call reported through cb");
  st_free(&r);

  /* value: absent, then staged writes seen by the event's own reads */
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, NULL);
  ST_OK(v, PROSODY_STATE_SET, sa_val("{\"a\":1}"));
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "{\"a\":1}");
  ST_STATUS(v, PROSODY_STATE_SET, sa_val("null"), PROSODY_ERR_NULL_VALUE, "null");
  ST_STATUS(v, PROSODY_STATE_SET, sa_val("  null\n"), PROSODY_ERR_NULL_VALUE, "null");
  ST_STATUS(v, PROSODY_STATE_SET, sa_val("{bad json"), PROSODY_ERR_TRANSIENT, "JSON");
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "{\"a\":1}"); /* the failed writes changed nothing */
  ST_OK(v, PROSODY_STATE_CLEAR, sa());
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, NULL);
  /* The operations of one handle run and report in call order. */
  {
    st_res rs[5];
    const char *vals[] = {"1", NULL, "2", NULL, NULL};
    for (int i = 0; i < 5; i++) {
      st_init(&rs[i]);
      prosody_state_args ai = vals[i] ? sa_val(vals[i]) : sa();
      EXPECT(prosody_state_call(v, vals[i] ? PROSODY_STATE_SET : PROSODY_STATE_GET, &ai, on_state, &rs[i], errp_), PROSODY_OK, NULL);
    }
    for (int i = 0; i < 5; i++) st_wait(__LINE__, &rs[i], PROSODY_OK, NULL);
    for (int i = 1; i < 5; i++) CHECK(rs[i].seq > rs[i - 1].seq, "report %d came before report %d", i, i - 1);
    CHECK(rs[1].n == 1 && strcmp(rs[1].items[0].value, "1") == 0, "read after the first write");
    CHECK(rs[3].n == 1 && strcmp(rs[3].items[0].value, "2") == 0, "read after the second write");
    for (int i = 0; i < 5; i++) st_free(&rs[i]);
  }
  ST_OK(v, PROSODY_STATE_SET, sa_val("{\"v\":1}"));

  /* map */
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("a"), NULL, NULL);
  ST_OK(m, PROSODY_STATE_SET, sa_kv("a", "\"A\""));
  ST_OK(m, PROSODY_STATE_SET, sa_kv("b", "\"B\""));
  ST_OK(m, PROSODY_STATE_SET, sa_kv("c", "\"C\""));
  ST_OK(m, PROSODY_STATE_SET, sa_kv("", "\"empty key\""));
  ST_STATUS(m, PROSODY_STATE_SET, sa_kv("n", "null"), PROSODY_ERR_NULL_VALUE, "null");
  ST_OK(m, PROSODY_STATE_REMOVE, sa_key("b"));
  ST_OK(m, PROSODY_STATE_REMOVE, sa_key("never"));
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("a"), "a", "\"A\"");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key(""), "", "\"empty key\"");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("b"), NULL, NULL);
  ST_NUMBER(m, PROSODY_STATE_CONTAINS, sa_key("a"), 1);
  ST_NUMBER(m, PROSODY_STATE_CONTAINS, sa_key("b"), 0);
  {
    prosody_state_item keys[4] = {{.key = "a", .key_len = 1}, {.key = "zz", .key_len = 2}, {.key = "a", .key_len = 1},
                                  {.key = "c", .key_len = 1}};
    prosody_state_args am = sa();
    am.keys = keys, am.keys_len = 4;
    if (st_run(__LINE__, m, PROSODY_STATE_GET_MANY, am, &r, PROSODY_OK, NULL) == PROSODY_OK) {
      CHECK(r.n == 4, "get_many of 4 keys reported %zu", r.n);
      const char *want[4] = {"\"A\"", NULL, "\"A\"", "\"C\""};
      for (size_t i = 0; r.n == 4 && i < 4; i++) {
        CHECK(r.items[i].key && strcmp(r.items[i].key, keys[i].key) == 0, "get_many item %zu key", i);
        CHECK(want[i] ? r.items[i].value && strcmp(r.items[i].value, want[i]) == 0 : r.items[i].value == NULL,
              "get_many item %zu value %s", i, r.items[i].value ? r.items[i].value : "(null)");
      }
    }
    st_free(&r);
    am.keys = NULL, am.keys_len = 0;
    if (st_run(__LINE__, m, PROSODY_STATE_GET_MANY, am, &r, PROSODY_OK, NULL) == PROSODY_OK) CHECK(r.n == 0, "get_many of none");
    st_free(&r);
  }

  /* deque with capacity 3: appending past it drops the oldest */
  ST_NUMBER(d, PROSODY_STATE_IS_EMPTY, sa(), 1);
  ST_ITEM(d, PROSODY_STATE_PEEK_FRONT, sa(), NULL, NULL);
  ST_ITEM(d, PROSODY_STATE_POP_BACK, sa(), NULL, NULL);
  ST_OK(d, PROSODY_STATE_PUSH_BACK, sa_val("1"));
  ST_OK(d, PROSODY_STATE_PUSH_BACK, sa_val("2"));
  ST_OK(d, PROSODY_STATE_PUSH_BACK, sa_val("3"));
  ST_OK(d, PROSODY_STATE_PUSH_BACK, sa_val("4"));
  ST_STATUS(d, PROSODY_STATE_PUSH_BACK, sa_val("null"), PROSODY_ERR_NULL_VALUE, NULL);
  ST_NUMBER(d, PROSODY_STATE_LEN, sa(), 3);
  ST_NUMBER(d, PROSODY_STATE_IS_EMPTY, sa(), 0);
  ST_ITEM(d, PROSODY_STATE_PEEK_FRONT, sa(), NULL, "2");
  ST_ITEM(d, PROSODY_STATE_PEEK_BACK, sa(), NULL, "4");
  ST_ITEM(d, PROSODY_STATE_GET, sa_index(1), NULL, "3");
  ST_ITEM(d, PROSODY_STATE_GET, sa_index(3), NULL, NULL);
  ST_ITEM(d, PROSODY_STATE_POP_FRONT, sa(), NULL, "2");
  ST_OK(d, PROSODY_STATE_PUSH_FRONT, sa_val("1"));
  ST_ITEM(d, PROSODY_STATE_POP_BACK, sa(), NULL, "4");
  ST_NUMBER(d, PROSODY_STATE_LEN, sa(), 2); /* [1, 3] */

  /* a message collection stores messages only */
  const char *msg = "{\"topic\":\"t\",\"partition\":0,\"offset\":5,\"key\":\"k\",\"timestamp\":1700000000000,\"payload\":{\"x\":1}}";
  ST_OK(msgs, PROSODY_STATE_PUSH_BACK, sa_val(msg));
  ST_STATUS(msgs, PROSODY_STATE_PUSH_BACK, sa_val("{\"x\":1}"), PROSODY_ERR_TRANSIENT, "message");
  ST_STATUS(msgs, PROSODY_STATE_PUSH_BACK, sa_val("[1,2]"), PROSODY_ERR_TRANSIENT, "message");
  ST_ITEM(msgs, PROSODY_STATE_PEEK_FRONT, sa(), NULL, msg);
  ST_NUMBER(msgs, PROSODY_STATE_LEN, sa(), 1);

  /* Scans of the event's own writes: 300 entries queued without waiting. */
  {
    st_res *rs = calloc(BIG, sizeof *rs);
    for (int i = 0; i < BIG; i++) {
      /* 7 and 300 are coprime: every key once, out of order */
      const char *k = big[(i * 7) % BIG];
      char val[16], item[8];
      snprintf(val, sizeof val, "\"%s!\"", k);
      snprintf(item, sizeof item, "%d", i);
      st_init(&rs[i]);
      prosody_state_args ai = sa_kv(k, val);
      EXPECT(prosody_state_call(bm, PROSODY_STATE_SET, &ai, on_state, &rs[i], errp_), PROSODY_OK, NULL);
      st_res qr;
      prosody_state_args aq = sa_val(item);
      /* the arguments are copied at once: val and item die here */
      st_run(__LINE__, q, PROSODY_STATE_PUSH_BACK, aq, &qr, PROSODY_OK, NULL);
      st_free(&qr);
    }
    for (int i = 0; i < BIG; i++) {
      st_wait(__LINE__, &rs[i], PROSODY_OK, NULL);
      st_free(&rs[i]);
    }
    free(rs);
  }
  st_scan_map(__LINE__, bm, PROSODY_STATE_FORWARD, 0, big, BIG);
  st_scan_map(__LINE__, bm, PROSODY_STATE_BACKWARD, 0, big, BIG);
  st_scan_map(__LINE__, bm, PROSODY_STATE_FORWARD, 1, big, BIG);
  st_scan_deque(__LINE__, q, PROSODY_STATE_FORWARD, 0, BIG - 1);
  st_scan_deque(__LINE__, q, PROSODY_STATE_BACKWARD, 0, BIG - 1);
  EXPECT(prosody_event_complete(e1.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  /* The handles outlive their event: operations report TRANSIENT. */
  ST_STATUS(v, PROSODY_STATE_GET, sa(), PROSODY_ERR_TRANSIENT, "no longer valid");
  ST_STATUS(m, PROSODY_STATE_SET, sa_kv("late", "1"), PROSODY_ERR_TRANSIENT, "no longer valid");
  EXPECT(prosody_event_state(e1.event, "v", 1, PROSODY_STATE_VALUE, &h, errp_), PROSODY_ERR_INVALID_HANDLE, "unknown");
  for (uint64_t *hs[] = {&v, &m, &d, &q, &bm, &msgs, NULL}, **p = hs; *p; p++) st_release(**p);
  EXPECT(prosody_state_release(v, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  st_init(&r);
  EXPECT(prosody_state_call(v, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_state_scan(m, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  waiter_destroy(&r.w);

  /* ---- event 2: event 1's writes are committed; a COMMIT, then failure ---- */
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e2, 20)) goto out;
  v = ST_OPEN(e2.event, "v", PROSODY_STATE_VALUE);
  m = ST_OPEN(e2.event, "m", PROSODY_STATE_MAP);
  d = ST_OPEN(e2.event, "d", PROSODY_STATE_DEQUE);
  q = ST_OPEN(e2.event, "q", PROSODY_STATE_DEQUE);
  bm = ST_OPEN(e2.event, "big", PROSODY_STATE_MAP);
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "{\"v\":1}");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("c"), "c", "\"C\"");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("b"), NULL, NULL);
  ST_NUMBER(d, PROSODY_STATE_LEN, sa(), 2);
  ST_ITEM(d, PROSODY_STATE_PEEK_FRONT, sa(), NULL, "1");
  ST_ITEM(d, PROSODY_STATE_PEEK_BACK, sa(), NULL, "3");
  /* Scans of stored entries merged with staged changes across chunks. */
  st_scan_map(__LINE__, bm, PROSODY_STATE_FORWARD, 0, big, BIG);
  st_scan_deque(__LINE__, q, PROSODY_STATE_BACKWARD, 0, BIG - 1);
  {
    char *edited[BIG + 1];
    size_t n = 0;
    for (int i = 0; i < BIG; i++) {
      if (i == 5 || i == 260) continue; /* removed */
      edited[n++] = big[i];
      if (i == 255) edited[n++] = "k255a"; /* added at a chunk boundary */
    }
    ST_OK(bm, PROSODY_STATE_REMOVE, sa_key("k005"));
    ST_OK(bm, PROSODY_STATE_REMOVE, sa_key("k260"));
    ST_OK(bm, PROSODY_STATE_SET, sa_kv("k255a", "\"k255a!\""));
    st_scan_map(__LINE__, bm, PROSODY_STATE_FORWARD, 0, edited, n);
    st_scan_map(__LINE__, bm, PROSODY_STATE_BACKWARD, 1, edited, n);
    ST_OK(bm, PROSODY_STATE_ROLLBACK, sa());
    st_scan_map(__LINE__, bm, PROSODY_STATE_BACKWARD, 0, big, BIG);
  }
  ST_OK(q, PROSODY_STATE_POP_FRONT, sa());
  ST_OK(q, PROSODY_STATE_PUSH_BACK, sa_val("300"));
  st_scan_deque(__LINE__, q, PROSODY_STATE_FORWARD, 1, BIG);
  ST_OK(v, PROSODY_STATE_SET, sa_val("2"));
  ST_OK(m, PROSODY_STATE_SET, sa_kv("x", "\"X\""));
  ST_OK(m, PROSODY_STATE_COMMIT, sa());
  ST_OK(m, PROSODY_STATE_SET, sa_kv("y", "\"Y\""));
  ST_OK(d, PROSODY_STATE_CLEAR, sa());
  ST_NUMBER(d, PROSODY_STATE_IS_EMPTY, sa(), 1);
  /* A cursor open when the event completes reports TRANSIENT afterwards. */
  EXPECT(prosody_state_scan(bm, PROSODY_STATE_FORWARD, 0, &cur, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_event_complete(e2.event, PROSODY_OUTCOME_TRANSIENT, "try again", errp_), PROSODY_OK, NULL);
  ST_STATUS(v, PROSODY_STATE_SET, sa_val("3"), PROSODY_ERR_TRANSIENT, "no longer valid");
  {
    st_item *items;
    size_t n, chunks;
    int st = st_drain(__LINE__, cur, &items, &n, &chunks);
    CHECK(st == PROSODY_ERR_TRANSIENT, "cursor after its event: %s", prosody_status_name(st));
    st_items_free(items, n);
  }
  /* A released state handle's cursors stay usable until released. */
  uint64_t cur2 = 0;
  EXPECT(prosody_state_scan(m, PROSODY_STATE_FORWARD, 0, &cur2, errp_), PROSODY_OK, NULL);
  for (uint64_t *hs[] = {&v, &m, &d, &q, &bm, NULL}, **p = hs; *p; p++) st_release(**p);
  {
    st_res rc;
    st_init(&rc);
    EXPECT(prosody_cursor_next(cur2, on_state, &rc, errp_), PROSODY_OK, NULL);
    st_wait(__LINE__, &rc, PROSODY_ERR_TRANSIENT, "no longer valid");
    st_free(&rc);
    EXPECT(prosody_cursor_next(cur2, NULL, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  }
  EXPECT(prosody_cursor_release(cur, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_cursor_release(cur2, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_cursor_release(cur2, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  st_init(&r);
  EXPECT(prosody_cursor_next(cur2, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  waiter_destroy(&r.w);

  /* ---- event 2 again: the staged writes were discarded, the committed map kept ---- */
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e2r, 20)) goto out;
  CHECK(e2r.offset == e2.offset && e2r.event != e2.event, "the failed event is retried");
  v = ST_OPEN(e2r.event, "v", PROSODY_STATE_VALUE);
  m = ST_OPEN(e2r.event, "m", PROSODY_STATE_MAP);
  d = ST_OPEN(e2r.event, "d", PROSODY_STATE_DEQUE);
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "{\"v\":1}");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("x"), "x", "\"X\"");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("y"), NULL, NULL);
  ST_NUMBER(d, PROSODY_STATE_LEN, sa(), 2);
  /* ROLLBACK drops the changes since the last commit. */
  ST_OK(v, PROSODY_STATE_SET, sa_val("3"));
  ST_OK(v, PROSODY_STATE_ROLLBACK, sa());
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "{\"v\":1}");
  ST_OK(m, PROSODY_STATE_SET, sa_kv("z", "\"Z\""));
  ST_OK(m, PROSODY_STATE_COMMIT, sa());
  ST_OK(m, PROSODY_STATE_SET, sa_kv("w", "\"W\""));
  ST_OK(m, PROSODY_STATE_REMOVE, sa_key("a"));
  ST_OK(m, PROSODY_STATE_ROLLBACK, sa());
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("w"), NULL, NULL);
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("z"), "z", "\"Z\"");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("a"), "a", "\"A\"");
  ST_OK(v, PROSODY_STATE_SET, sa_val("4"));
  ST_OK(m, PROSODY_STATE_CLEAR, sa());
  ST_OK(m, PROSODY_STATE_SET, sa_kv("only", "\"O\""));
  ST_OK(d, PROSODY_STATE_POP_BACK, sa());
  EXPECT(prosody_event_complete(e2r.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  for (uint64_t *hs[] = {&v, &m, &d, NULL}, **p = hs; *p; p++) st_release(**p);

  /* ---- event 3: committed after OK; a timer event reads it too ---- */
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e3, 20)) goto out;
  v = ST_OPEN(e3.event, "v", PROSODY_STATE_VALUE);
  m = ST_OPEN(e3.event, "m", PROSODY_STATE_MAP);
  d = ST_OPEN(e3.event, "d", PROSODY_STATE_DEQUE);
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "4");
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("z"), NULL, NULL);
  ST_ITEM(m, PROSODY_STATE_GET, sa_key("only"), "only", "\"O\"");
  ST_ITEM(d, PROSODY_STATE_PEEK_BACK, sa(), NULL, "1");
  {
    waiter w;
    AWAIT(&w, prosody_event_schedule(e3.event, now_ms() - 1000, on_done, &w, &err_), 30, PROSODY_OK);
  }
  ST_OK(v, PROSODY_STATE_SET, sa_val("5"));
  EXPECT(prosody_event_complete(e3.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
  st_release(v);
  st_release(d);
  prosody_event t;
  if (next_event(consumer, PROSODY_EVENT_TIMER, &t, 20)) {
    uint64_t tv = ST_OPEN(t.event, "v", PROSODY_STATE_VALUE);
    ST_ITEM(tv, PROSODY_STATE_GET, sa(), NULL, "5");
    ST_OK(tv, PROSODY_STATE_SET, sa_val("6"));
    EXPECT(prosody_event_complete(t.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    st_release(tv);
  }

  /* ---- event 4: releasing the client releases the handles it holds ---- */
  send_one(sender, topic, "sk");
  prosody_event e4;
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e4, 20)) goto out;
  v = ST_OPEN(e4.event, "v", PROSODY_STATE_VALUE);
  ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, "6");
  EXPECT(prosody_state_scan(m, PROSODY_STATE_FORWARD, 0, &cur, errp_), PROSODY_OK, NULL); /* e3's map */
  /* operations queued when the client is released still report */
  st_res late;
  st_init(&late);
  prosody_state_args al = sa_val("7");
  EXPECT(prosody_state_call(v, PROSODY_STATE_SET, &al, on_state, &late, errp_), PROSODY_OK, NULL);
  release_client(consumer);
  consumer = 0;
  {
    int st = waiter_wait(&late.w, 30);
    CHECK(st == PROSODY_OK || st == PROSODY_ERR_TRANSIENT || st == PROSODY_ERR_TERMINAL, "queued at release: %s",
          prosody_status_name(st));
    CHECK(late.calls == 1 && !late.bad, "queued at release: %d calls", late.calls);
    st_free(&late);
  }
  st_init(&r);
  EXPECT(prosody_state_call(v, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_cursor_next(cur, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_state_release(m, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_cursor_release(cur, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  waiter_destroy(&r.w);
out:
  for (int i = 0; i < BIG; i++) free(big[i]);
  if (consumer) {
    unsubscribe(consumer);
    release_client(consumer);
  }
  release_client(sender);
}

/* An event that timed out (EXPIRED): a handle opened before and one opened
 * after both report TRANSIENT, and change nothing. */
static void test_state_expired(void) {
  char topic[64], group[64], cfg[1024];
  unique(topic, sizeof topic, "stexp");
  unique(group, sizeof group, "stexp-g");
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"timeout\":\"300ms\","
           "\"retry_base\":\"10ms\",\"max_retry_delay\":\"50ms\"," STATE_COLLECTIONS "}",
           group, topic);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  prosody_handler_config hc = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &hc);
  send_n(sender, topic, 1, "se");
  prosody_event m, notice, retry;
  if (next_event(consumer, PROSODY_EVENT_MESSAGE, &m, 20)) {
    uint64_t before = ST_OPEN(m.event, "v", PROSODY_STATE_VALUE);
    ST_OK(before, PROSODY_STATE_SET, sa_val("1"));
    if (next_event(consumer, PROSODY_EVENT_EXPIRED, &notice, 20)) {
      uint64_t after = ST_OPEN(m.event, "m", PROSODY_STATE_MAP);
      ST_STATUS(before, PROSODY_STATE_GET, sa(), PROSODY_ERR_TRANSIENT, NULL);
      ST_STATUS(after, PROSODY_STATE_SET, sa_kv("k", "1"), PROSODY_ERR_TRANSIENT, NULL);
      uint64_t cur = 0;
      EXPECT(prosody_state_scan(after, PROSODY_STATE_FORWARD, 0, &cur, errp_), PROSODY_OK, NULL);
      st_item *items;
      size_t n, chunks;
      int st = st_drain(__LINE__, cur, &items, &n, &chunks);
      CHECK(st == PROSODY_ERR_TRANSIENT, "scan of an expired event: %s", prosody_status_name(st));
      st_items_free(items, n);
      EXPECT(prosody_cursor_release(cur, errp_), PROSODY_OK, NULL);
      st_release(after);
    }
    /* The retry sees nothing of the expired attempt. */
    if (next_event(consumer, PROSODY_EVENT_MESSAGE, &retry, 20)) {
      uint64_t v = ST_OPEN(retry.event, "v", PROSODY_STATE_VALUE);
      ST_ITEM(v, PROSODY_STATE_GET, sa(), NULL, NULL);
      EXPECT(prosody_event_complete(retry.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
      st_release(v);
    }
    EXPECT(prosody_event_complete(m.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    st_release(before);
  }
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
}

static uint64_t rd_open(int line, uint64_t client, const char *sub, const char *name, int kind, int64_t ttl_ms) {
  uint64_t h = 0;
  char *err = NULL;
  int st = prosody_client_reader(client, sub, strlen(sub), name, strlen(name), kind, ttl_ms, &h, &err);
  if (st != PROSODY_OK) {
    fprintf(stderr, "line %d: prosody_client_reader(%s) = %s (%s)\n", line, name, prosody_status_name(st), err ? err : "");
    failures++;
  }
  CHECK((h & 0xff) == 6 || st != PROSODY_OK, "reader handle kind tag %#llx", (unsigned long long)h);
  prosody_free(err);
  return h;
}
#define RD_OPEN(client, sub, name, kind, ttl) rd_open(__LINE__, (client), (sub), (name), (kind), (ttl))

static uint64_t rd_scan(uint64_t r, const char *key, int dir, int keys_only) {
  uint64_t cur = 0;
  EXPECT(prosody_reader_scan(r, key, strlen(key), dir, keys_only, &cur, errp_), PROSODY_OK, NULL);
  return cur;
}

/* Published state read through readers of another client (one with no
 * consumer): committed state only, every read, scans, misuse. */
static void test_state_readers(void) {
  char topic[64], group[64], sub[64], cfg[1536];
  unique(topic, sizeof topic, "pub");
  unique(group, sizeof group, "pub-g");
  unique(sub, sizeof sub, "pub-sub");
  snprintf(cfg, sizeof cfg,
           "{" MOCK ",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"subsystem\":\"%s\",\"state_collections\":["
           "{\"name\":\"pv\",\"kind\":\"value\",\"payload\":\"json\",\"published\":true},"
           "{\"name\":\"pm\",\"kind\":\"map\",\"payload\":\"json\",\"published\":true},"
           "{\"name\":\"pd\",\"kind\":\"deque\",\"payload\":\"json\",\"published\":true},"
           "{\"name\":\"hidden\",\"kind\":\"value\",\"payload\":\"json\"}]}",
           group, topic, sub);
  uint64_t consumer = new_client(cfg);
  uint64_t sender = new_client("{" MOCK ",\"source_system\":\"capi-sender\"}");
  uint64_t rc = new_client("{" MOCK "}"); /* reads only */
  prosody_handler_config hc = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &hc);
  for (int i = 0; i < 3; i++) send_one(sender, topic, "rk");
  char *big[BIG + 1];
  for (int i = 0; i < BIG; i++) {
    big[i] = malloc(8);
    snprintf(big[i], 8, "k%03d", i);
  }
  uint64_t h = 0;

  /* Opening checks its arguments only. */
  EXPECT(prosody_client_reader(rc, sub, strlen(sub), "pv", 2, PROSODY_STATE_VALUE, 0, NULL, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "reader");
  EXPECT(prosody_client_reader(rc, NULL, 3, "pv", 2, PROSODY_STATE_VALUE, 0, &h, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "subsystem");
  EXPECT(prosody_client_reader(rc, "", 0, "pv", 2, PROSODY_STATE_VALUE, 0, &h, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "subsystem must not be empty");
  EXPECT(prosody_client_reader(rc, sub, strlen(sub), "", 0, PROSODY_STATE_VALUE, 0, &h, errp_),
         PROSODY_ERR_INVALID_ARGUMENT, "name must not be empty");
  EXPECT(prosody_client_reader(rc, sub, strlen(sub), "pv", 2, 0, 0, &h, errp_), PROSODY_ERR_INVALID_ARGUMENT, "kind");
  EXPECT(prosody_client_reader(0, sub, strlen(sub), "pv", 2, PROSODY_STATE_VALUE, 0, &h, errp_),
         PROSODY_ERR_INVALID_HANDLE, "handle 0");
  uint64_t rv = RD_OPEN(rc, sub, "pv", PROSODY_STATE_VALUE, 0);
  uint64_t rm = RD_OPEN(rc, sub, "pm", PROSODY_STATE_MAP, 0);
  uint64_t rd = RD_OPEN(rc, sub, "pd", PROSODY_STATE_DEQUE, 0);
  uint64_t rdef = RD_OPEN(rc, sub, "pv", PROSODY_STATE_VALUE, -1); /* the client's cache window */
  uint64_t rhid = RD_OPEN(rc, sub, "hidden", PROSODY_STATE_VALUE, 0);
  uint64_t rnone = RD_OPEN(rc, sub, "nope", PROSODY_STATE_MAP, 0);
  uint64_t rkind = RD_OPEN(rc, sub, "pv", PROSODY_STATE_MAP, 0);
  uint64_t rsub = RD_OPEN(rc, "no-such-subsystem", "pv", PROSODY_STATE_VALUE, 0);
  prosody_state_args a = sa_val("1");
  st_res r;
  st_init(&r);
  EXPECT(prosody_reader_call(rv, "rk", 2, PROSODY_STATE_GET, &a, NULL, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cb");
  EXPECT(prosody_reader_call(rv, "rk", 2, PROSODY_STATE_GET, NULL, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "args");
  EXPECT(prosody_reader_call(rv, NULL, 0, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT, "key");
  EXPECT(prosody_reader_call(rv, "\xff", 1, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "UTF-8");
  EXPECT(prosody_reader_call(rv, "rk", 2, PROSODY_STATE_SET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "not a read");
  EXPECT(prosody_reader_call(rm, "rk", 2, PROSODY_STATE_REMOVE, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "not a read");
  EXPECT(prosody_reader_call(rd, "rk", 2, PROSODY_STATE_POP_FRONT, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "not a read");
  EXPECT(prosody_reader_call(rd, "rk", 2, PROSODY_STATE_COMMIT, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "not a read");
  EXPECT(prosody_reader_call(rm, "rk", 2, PROSODY_STATE_LEN, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "not an operation of a map");
  prosody_state_args none = sa();
  EXPECT(prosody_reader_call(rm, "rk", 2, PROSODY_STATE_GET, &none, on_state, &r, errp_), PROSODY_ERR_INVALID_ARGUMENT,
         "key");
  EXPECT(prosody_reader_call(rc, "rk", 2, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE,
         "kind client");
  uint64_t c0 = 0;
  EXPECT(prosody_reader_scan(rv, "rk", 2, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "value");
  EXPECT(prosody_reader_scan(rm, "rk", 2, 2, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "backward");
  EXPECT(prosody_reader_scan(rm, "rk", 2, PROSODY_STATE_FORWARD, 0, NULL, errp_), PROSODY_ERR_INVALID_ARGUMENT, "cursor");
  EXPECT(prosody_reader_scan(rm, NULL, 0, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_ARGUMENT, "key");
  EXPECT(prosody_reader_release(rc, errp_), PROSODY_ERR_INVALID_HANDLE, "kind client");
  CHECK(r.calls == 0, "a refused call reported through cb");
  waiter_destroy(&r.w);

  /* The routing record decides at the first read. */
  RD_STATUS(rhid, "rk", PROSODY_STATE_GET, sa(), PROSODY_ERR_PERMANENT, "publishes no collection");
  RD_STATUS(rnone, "rk", PROSODY_STATE_GET, sa_key("a"), PROSODY_ERR_PERMANENT, "publishes no collection");
  RD_STATUS(rsub, "rk", PROSODY_STATE_GET, sa(), PROSODY_ERR_PERMANENT, "publishes no collection");
  RD_STATUS(rkind, "rk", PROSODY_STATE_CONTAINS, sa_key("a"), PROSODY_ERR_PERMANENT, "not a map");
  uint64_t cbad = rd_scan(rnone, "rk", PROSODY_STATE_FORWARD, 0);
  {
    st_item *items;
    size_t n, chunks;
    int st = st_drain(__LINE__, cbad, &items, &n, &chunks);
    CHECK(st == PROSODY_ERR_PERMANENT, "scan of an unpublished collection: %s", prosody_status_name(st));
    st_items_free(items, n);
    EXPECT(prosody_cursor_release(cbad, errp_), PROSODY_OK, NULL);
  }
  /* Nothing written yet. */
  RD_ITEM(rv, "rk", PROSODY_STATE_GET, sa(), NULL, NULL);
  RD_NUMBER(rd, "rk", PROSODY_STATE_IS_EMPTY, sa(), 1);

  /* ---- event 1 writes and commits ---- */
  prosody_event e1, e2, e3;
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e1, 20)) goto out;
  {
    uint64_t v = ST_OPEN(e1.event, "pv", PROSODY_STATE_VALUE);
    uint64_t m = ST_OPEN(e1.event, "pm", PROSODY_STATE_MAP);
    uint64_t d = ST_OPEN(e1.event, "pd", PROSODY_STATE_DEQUE);
    ST_OK(v, PROSODY_STATE_SET, sa_val("{\"n\":1}"));
    for (int i = 0; i < BIG; i++) {
      char val[16], item[8];
      snprintf(val, sizeof val, "\"%s!\"", big[i]);
      snprintf(item, sizeof item, "%d", i + 1);
      ST_OK(m, PROSODY_STATE_SET, sa_kv(big[i], val));
      ST_OK(d, PROSODY_STATE_PUSH_BACK, sa_val(item));
    }
    /* A reader never sees an attempt's staged writes. */
    RD_ITEM(rv, "rk", PROSODY_STATE_GET, sa(), NULL, NULL);
    RD_NUMBER(rm, "rk", PROSODY_STATE_CONTAINS, sa_key("k001"), 0);
    EXPECT(prosody_event_complete(e1.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    st_release(v), st_release(m), st_release(d);
  }
  /* The commit follows the completion; the key's next event, after it. */
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e2, 20)) goto out;
  RD_ITEM(rv, "rk", PROSODY_STATE_GET, sa(), NULL, "{\"n\":1}");
  RD_ITEM(rdef, "rk", PROSODY_STATE_GET, sa(), NULL, "{\"n\":1}");
  RD_ITEM(rv, "other", PROSODY_STATE_GET, sa(), NULL, NULL);
  RD_ITEM(rm, "rk", PROSODY_STATE_GET, sa_key("k001"), "k001", "\"k001!\"");
  RD_ITEM(rm, "rk", PROSODY_STATE_GET, sa_key("zz"), NULL, NULL);
  RD_NUMBER(rm, "rk", PROSODY_STATE_CONTAINS, sa_key("k299"), 1);
  RD_NUMBER(rm, "rk", PROSODY_STATE_CONTAINS, sa_key("zz"), 0);
  {
    prosody_state_item keys[3] = {{.key = "k007", .key_len = 4}, {.key = "zz", .key_len = 2}, {.key = "k007", .key_len = 4}};
    prosody_state_args am = sa();
    am.keys = keys, am.keys_len = 3;
    if (st_run_on(__LINE__, rm, "rk", PROSODY_STATE_GET_MANY, am, &r, PROSODY_OK, NULL) == PROSODY_OK) {
      CHECK(r.n == 3 && r.items[1].value == NULL && strcmp(r.items[1].key, "zz") == 0, "reader get_many absent key");
      for (size_t i = 0; r.n == 3 && i < 3; i += 2)
        CHECK(strcmp(r.items[i].key, "k007") == 0 && r.items[i].value && strcmp(r.items[i].value, "\"k007!\"") == 0,
              "reader get_many item %zu", i);
    }
    st_free(&r);
  }
  RD_NUMBER(rd, "rk", PROSODY_STATE_LEN, sa(), BIG);
  RD_NUMBER(rd, "rk", PROSODY_STATE_IS_EMPTY, sa(), 0);
  RD_NUMBER(rd, "other", PROSODY_STATE_LEN, sa(), 0);
  RD_ITEM(rd, "rk", PROSODY_STATE_PEEK_FRONT, sa(), NULL, "1");
  RD_ITEM(rd, "rk", PROSODY_STATE_PEEK_BACK, sa(), NULL, "300");
  RD_ITEM(rd, "rk", PROSODY_STATE_GET, sa_index(9), NULL, "10");
  RD_ITEM(rd, "rk", PROSODY_STATE_GET, sa_index(BIG), NULL, NULL);
  RD_ITEM(rd, "other", PROSODY_STATE_PEEK_BACK, sa(), NULL, NULL);
  st_check_map(__LINE__, rd_scan(rm, "rk", PROSODY_STATE_FORWARD, 0), PROSODY_STATE_FORWARD, 0, big, BIG);
  st_check_map(__LINE__, rd_scan(rm, "rk", PROSODY_STATE_BACKWARD, 1), PROSODY_STATE_BACKWARD, 1, big, BIG);
  st_check_map(__LINE__, rd_scan(rm, "other", PROSODY_STATE_FORWARD, 0), PROSODY_STATE_FORWARD, 0, big, 0);
  st_check_deque(__LINE__, rd_scan(rd, "rk", PROSODY_STATE_FORWARD, 0), PROSODY_STATE_FORWARD, 1, BIG);
  st_check_deque(__LINE__, rd_scan(rd, "rk", PROSODY_STATE_BACKWARD, 0), PROSODY_STATE_BACKWARD, 1, BIG);
  /* A reader's reads may run at once; each reports exactly once. */
  {
    enum { N = 32 };
    st_res rs[N];
    for (int i = 0; i < N; i++) {
      st_init(&rs[i]);
      prosody_state_args ai = sa_key(big[i]);
      EXPECT(prosody_reader_call(rm, "rk", 2, PROSODY_STATE_GET, &ai, on_state, &rs[i], errp_), PROSODY_OK, NULL);
    }
    for (int i = 0; i < N; i++) {
      if (st_wait(__LINE__, &rs[i], PROSODY_OK, NULL) == PROSODY_OK)
        CHECK(rs[i].n == 1 && strcmp(rs[i].items[0].key, big[i]) == 0, "concurrent read %d", i);
      st_free(&rs[i]);
    }
  }

  /* ---- event 2: committed state only, until its commit ---- */
  {
    uint64_t v = ST_OPEN(e2.event, "pv", PROSODY_STATE_VALUE);
    ST_OK(v, PROSODY_STATE_SET, sa_val("{\"n\":2}"));
    RD_ITEM(rv, "rk", PROSODY_STATE_GET, sa(), NULL, "{\"n\":1}");
    EXPECT(prosody_event_complete(e2.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    st_release(v);
  }
  if (!next_event(consumer, PROSODY_EVENT_MESSAGE, &e3, 20)) goto out;
  RD_ITEM(rv, "rk", PROSODY_STATE_GET, sa(), NULL, "{\"n\":2}");
  EXPECT(prosody_event_complete(e3.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);

  /* A released reader: its cursors stay usable until released. */
  uint64_t cur = rd_scan(rm, "rk", PROSODY_STATE_FORWARD, 0);
  EXPECT(prosody_reader_release(rm, errp_), PROSODY_OK, NULL);
  EXPECT(prosody_reader_release(rm, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  st_init(&r);
  EXPECT(prosody_reader_call(rm, "rk", 2, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE,
         "released");
  EXPECT(prosody_reader_scan(rm, "rk", 2, PROSODY_STATE_FORWARD, 0, &c0, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  waiter_destroy(&r.w);
  st_check_map(__LINE__, cur, PROSODY_STATE_FORWARD, 0, big, BIG);

  /* Releasing the client releases its readers and cursors. */
  cur = rd_scan(rd, "rk", PROSODY_STATE_FORWARD, 0);
  release_client(rc);
  rc = 0;
  st_init(&r);
  EXPECT(prosody_reader_call(rv, "rk", 2, PROSODY_STATE_GET, &a, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE,
         "released");
  EXPECT(prosody_cursor_next(cur, on_state, &r, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  EXPECT(prosody_reader_release(rd, errp_), PROSODY_ERR_INVALID_HANDLE, "released");
  waiter_destroy(&r.w);
out:
  for (int i = 0; i < BIG; i++) free(big[i]);
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
  if (rc) release_client(rc);
}

/* fork(): the child gets PROSODY_ERR_AFTER_FORK at once; the parent goes on. */
static void test_fork(void) {
  uint64_t c = new_client("{" MOCK ",\"source_system\":\"capi-fork\"}");
  pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    const char *v;
    uint64_t h;
    char *err = NULL;
    bad |= prosody_version(&v) != PROSODY_ERR_AFTER_FORK;
    bad |= prosody_client_new("{" MOCK "}", &h, &err) != PROSODY_ERR_AFTER_FORK;
    bad |= err == NULL || strstr(err, "used after fork") == NULL;
    prosody_free(err);
    bad |= prosody_client_send(c, "t", 1, "k", 1, (const uint8_t *)"{}", 2, NULL, on_done, NULL, NULL) != PROSODY_ERR_AFTER_FORK;
    bad |= prosody_event_complete(1, 0, NULL, NULL) != PROSODY_ERR_AFTER_FORK;
    bad |= strcmp(prosody_status_name(PROSODY_ERR_AFTER_FORK), "PROSODY_ERR_AFTER_FORK") != 0;
    _exit(bad ? 3 : 0);
  }
  CHECK(pid > 0, "fork failed");
  int status = -1;
  double deadline = now_s() + 10;
  while (now_s() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    usleep(10000);
  }
  if (!WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    CHECK(0, "the forked child hung");
  } else {
    CHECK(WEXITSTATUS(status) == 0, "child exit %d", WEXITSTATUS(status));
  }
  /* The parent is unaffected. */
  const char *v = NULL;
  CHECK(prosody_version(&v) == PROSODY_OK, "parent version after fork");
  char *s = NULL;
  EXPECT(prosody_client_source_system(c, &s, errp_), PROSODY_OK, NULL);
  prosody_free(s);
  release_client(c);
}

/* A round trip against the real broker. */
static void test_real_kafka(const char *brokers, const char *cassandra) {
  char topic[64], group[64], cfg[512];
  unique(topic, sizeof topic, "real");
  unique(group, sizeof group, "real-g");
  snprintf(cfg, sizeof cfg, "{\"bootstrap_servers\":\"%s\"}", brokers);
  uint64_t admin;
  EXPECT(prosody_admin_new(cfg, &admin, errp_), PROSODY_OK, NULL);
  create_topic(admin, topic, 2);
  snprintf(cfg, sizeof cfg,
           "{\"bootstrap_servers\":\"%s\",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"probe_port\":null,"
           "\"commit_interval\":\"100ms\",\"cassandra_nodes\":\"%s\"}",
           brokers, group, topic, cassandra);
  uint64_t consumer = new_client(cfg);
  snprintf(cfg, sizeof cfg, "{\"bootstrap_servers\":\"%s\",\"source_system\":\"capi-real-sender\"}", brokers);
  uint64_t sender = new_client(cfg);
  prosody_handler_config h = {.size = sizeof(prosody_handler_config), .notify = on_notify, .user_data = &notifies};
  subscribe(consumer, &h);
  enum { N = 50 };
  send_n(sender, topic, N, "real");
  size_t got = 0;
  double deadline = now_s() + 60;
  while (got < N && now_s() < deadline) {
    prosody_event batch[N];
    size_t n = collect(consumer, batch, N, 1, 1);
    prosody_completion done[N];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
      if (batch[i].kind != PROSODY_EVENT_MESSAGE) continue;
      got++;
      done[nd++] = (prosody_completion){batch[i].event, PROSODY_OUTCOME_OK, NULL};
    }
    EXPECT(prosody_events_complete(done, nd, sizeof(prosody_completion), errp_), PROSODY_OK, NULL);
  }
  CHECK(got == N, "real kafka: received %zu of %d", got, N);
  uint32_t parts = 0;
  EXPECT(prosody_client_assigned_partition_count(consumer, &parts, errp_), PROSODY_OK, NULL);
  CHECK(parts == 2, "partitions %u", parts);
  unsubscribe(consumer);
  /* Telemetry is on by default against real Kafka: both clients' events
   * (sends, dispatches, successes) are written and acknowledged. */
  waiter w;
  AWAIT(&w, prosody_flush_telemetry(30000, on_done, &w, &err_), 60, PROSODY_OK);
  release_client(consumer);
  release_client(sender);
  AWAIT(&w, prosody_admin_delete_topic(admin, topic, strlen(topic), on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
  /* A bad broker address reaches the completion, not the caller. */
  EXPECT(prosody_admin_new("{\"bootstrap_servers\":\"127.0.0.1:1\"}", &admin, errp_), PROSODY_OK, NULL);
  waiter_init(&w, 1);
  EXPECT(prosody_admin_create_topic(admin, "{\"name\":\"never\"}", on_done, &w, errp_), PROSODY_OK, NULL);
  int st = waiter_wait(&w, 60);
  CHECK(st != PROSODY_OK && st != -1, "create on a dead broker: %d", st);
  waiter_destroy(&w);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

/* A timer against real Kafka and Cassandra: scheduled 1 s ahead from a
 * message handler, received as a TIMER event. */
static void test_real_timers(const char *brokers, const char *cassandra) {
  char topic[64], group[64], keyspace[64], cfg[768];
  unique(topic, sizeof topic, "rtimer");
  unique(group, sizeof group, "rtimer-g");
  snprintf(keyspace, sizeof keyspace, "capi_timers_%d_%lld", (int)getpid(), (long long)(now_ms() / 1000));
  snprintf(cfg, sizeof cfg, "{\"bootstrap_servers\":\"%s\"}", brokers);
  uint64_t admin;
  EXPECT(prosody_admin_new(cfg, &admin, errp_), PROSODY_OK, NULL);
  create_topic(admin, topic, 1);
  snprintf(cfg, sizeof cfg,
           "{\"bootstrap_servers\":\"%s\",\"group_id\":\"%s\",\"subscribed_topics\":\"%s\",\"probe_port\":null,"
           "\"commit_interval\":\"100ms\",\"cassandra_nodes\":\"%s\",\"cassandra_keyspace\":\"%s\"}",
           brokers, group, topic, cassandra, keyspace);
  uint64_t consumer = new_client(cfg);
  snprintf(cfg, sizeof cfg, "{\"bootstrap_servers\":\"%s\",\"source_system\":\"capi-real-sender\"}", brokers);
  uint64_t sender = new_client(cfg);
  prosody_handler_config h = {.size = sizeof(prosody_handler_config)};
  subscribe(consumer, &h);
  send_n(sender, topic, 1, "rt");
  prosody_event m, t;
  waiter w;
  if (next_event(consumer, PROSODY_EVENT_MESSAGE, &m, 90)) {
    int64_t at = ((now_ms() + 500) / 1000 + 1) * 1000; /* a whole second about 1 s ahead */
    AWAIT(&w, prosody_event_schedule(m.event, at, on_done, &w, &err_), 30, PROSODY_OK);
    EXPECT_TIMES(m.event, at);
    EXPECT(prosody_event_complete(m.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    if (next_event(consumer, PROSODY_EVENT_TIMER, &t, 30)) {
      CHECK(t.time_ms == at, "time_ms %lld, want %lld", (long long)t.time_ms, (long long)at);
      CHECK(t.key_len == 4 && memcmp(t.key, "rt-0", 4) == 0, "timer key %.*s", (int)t.key_len, t.key);
      CHECK(now_ms() >= at - 500, "fired %lld ms early", (long long)(at - now_ms()));
      EXPECT_NO_TIMES(t.event);
      EXPECT(prosody_event_complete(t.event, PROSODY_OUTCOME_OK, NULL, errp_), PROSODY_OK, NULL);
    }
  }
  unsubscribe(consumer);
  release_client(consumer);
  release_client(sender);
  AWAIT(&w, prosody_admin_delete_topic(admin, topic, strlen(topic), on_done, &w, &err_), 30, PROSODY_OK);
  EXPECT(prosody_admin_release(admin, errp_), PROSODY_OK, NULL);
}

int main(int argc, char **argv) {
  const char *kafka = NULL, *cassandra = "localhost:9042";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--kafka") == 0 && i + 1 < argc) kafka = argv[++i];
    if (strcmp(argv[i], "--cassandra") == 0 && i + 1 < argc) cassandra = argv[++i];
  }
  struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {
      {"library", test_library},
      {"client_config_errors", test_client_config_errors},
      {"client_queries", test_client_queries},
      {"handles", test_handles},
      {"admin", test_admin},
      {"events", test_events},
      {"direct", test_direct},
      {"trace_context", test_trace_context},
      {"send_order", test_send_order},
      {"cancellation", test_cancellation},
      {"boundary", test_boundary},
      {"unsubscribe_in_flight", test_unsubscribe_in_flight},
      {"timers", test_timers},
      {"timers_cancelled", test_timers_cancelled},
      {"state", test_state},
      {"state_expired", test_state_expired},
      {"state_readers", test_state_readers},
      {"fork", test_fork},
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    int before = failures;
    double t0 = now_s();
    tests[i].fn();
    printf("%s %s (%.2fs)\n", failures == before ? "ok  " : "FAIL", tests[i].name, now_s() - t0);
  }
  if (kafka != NULL) {
    int before = failures;
    double t0 = now_s();
    test_real_kafka(kafka, cassandra);
    printf("%s real_kafka (%.2fs)\n", failures == before ? "ok  " : "FAIL", now_s() - t0);
    before = failures;
    t0 = now_s();
    test_real_timers(kafka, cassandra);
    printf("%s real_timers (%.2fs)\n", failures == before ? "ok  " : "FAIL", now_s() - t0);
  }
  CHECK(atomic_load(&log_records) > 0, "no log records reached the callback");
  CHECK(atomic_load(&log_bad) == 0, "%d malformed log records", atomic_load(&log_bad));
  EXPECT(prosody_set_log_callback(NULL, NULL, errp_), PROSODY_OK, NULL);
  printf("%s: %d failure(s), %d log records forwarded\n", failures ? "FAIL" : "PASS", failures,
         atomic_load(&log_records));
  return failures ? 1 : 0;
}
