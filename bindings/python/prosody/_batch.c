/* prosody._batch: turns a polled batch of prosody_event into Python objects.
 *
 * The event loop handles every event, so what it pays per event decides the
 * binding's throughput. Building a Message in Python (slice and decode the
 * key, decode and scan the payload, make the timestamp, set six slots) costs
 * more than the handler call that follows; here it is one C call per batch,
 * which also makes each event's Context (its slots start from the table the
 * Python side gives, see context.py INITIAL_SLOTS).
 *
 * The results are those of the Python code this replaces: the payload is
 * decoded by the json module's own scanner, and whatever this code cannot
 * build (a payload with whitespace around it, bytes that are not UTF-8, a
 * timestamp outside the fast range) is left to the same Python functions,
 * json.loads and datetime.fromtimestamp, so the values and the errors are
 * theirs. One difference: timestamps are exact to the millisecond, where
 * datetime.fromtimestamp(ms / 1000) loses microseconds to the float after
 * 2^33 seconds (the year 2242).
 *
 * It keeps to the limited API of Python 3.10 (the stable ABI), so that one
 * build serves every CPython from 3.10 on: a wheel per platform, not per
 * platform and Python version. What that costs: a datetime is made by
 * calling the class instead of through the datetime C API, and slots are
 * set through their descriptors' tp_descr_set looked up once at init
 * (PyType_GetSlot) rather than read from the type on every event.
 */
#ifndef PROSODY_FULL_API /* setup.py sets it for a free-threaded CPython, which has no stable ABI */
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "prosody.h"

/* The Message slots, in the order of the dataclass fields. */
enum { SLOT_TOPIC, SLOT_PARTITION, SLOT_OFFSET, SLOT_TIMESTAMP, SLOT_KEY, SLOT_PAYLOAD, N_SLOTS };
static const char *const slot_names[N_SLOTS] = {"topic", "partition", "offset",
                                                "timestamp", "key", "payload"};

/* The kinds of a row whose event could not be built (row_of): its item is
 * the exception. The other kinds are the PROSODY_EVENT_* constants. */
#define KIND_FAILED 0
#define KIND_INTERRUPTED (-1)

/* Py_XSETREF is not part of the limited API. */
#define SETREF(dst, src)       \
  do {                         \
    PyObject *old_ = (PyObject *)(dst); \
    (dst) = (src);             \
    Py_XDECREF(old_);          \
  } while (0)

typedef struct {
  PyObject_HEAD
  PyObject *buffer; /* keeps the polled array alive */
  const prosody_event *events;
  Py_ssize_t capacity;
  PyTypeObject *message;
  allocfunc message_alloc;
  PyObject *timer;
  PyObject *scan;          /* json.JSONDecoder().scan_once */
  PyObject *loads;         /* json.loads */
  PyObject *fromtimestamp; /* datetime.fromtimestamp */
  PyObject *datetime;      /* the class fromtimestamp is bound to */
  PyObject *utc;
  PyObject *slots[N_SLOTS]; /* Message's member descriptors */
  descrsetfunc slot_set[N_SLOTS];
  /* The handler's Context: its class, and for each of its slots the member
   * descriptor and the value a new one starts with (NULL for the two set
   * per event: the dispatcher and the event handle). */
  PyTypeObject *context;
  allocfunc context_alloc;
  PyObject *dispatcher;
  Py_ssize_t n_context_slots;
  PyObject **context_slots;
  descrsetfunc *context_set;
  PyObject **context_initial;
  Py_ssize_t slot_disp, slot_event;
  /* The topic of the last event built, as bytes and as str. */
  char *topic_bytes;
  Py_ssize_t topic_len;
  PyObject *topic;
  /* The timestamp of the last message built. */
  int64_t ts_ms;
  PyObject *ts;
} Builder;

/* Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
 * civil_from_days). */
static void civil_from_days(int64_t z, int *y, int *m, int *d) {
  int64_t era, doe, yoe, doy, mp;
  z += 719468;
  era = (z >= 0 ? z : z - 146096) / 146097;
  doe = z - era * 146097;
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yoe + era * 400 + (*m <= 2));
}

/* 9999-12-31T23:59:59.999Z, the last millisecond a datetime holds. */
#define MAX_FAST_MS INT64_C(253402300799999)

/* A UTC datetime for epoch milliseconds, as
 * datetime.fromtimestamp(ms / 1000, timezone.utc) gives it. Times before
 * 1970 and after the year 9999 take that call itself. */
static PyObject *utc_datetime(Builder *b, int64_t ms) {
  int64_t secs, days, sod;
  int y, mo, d;
  if (ms < 0 || ms > MAX_FAST_MS) {
    return PyObject_CallFunction(b->fromtimestamp, "dO", (double)ms / 1000.0, b->utc);
  }
  secs = ms / 1000;
  days = secs / 86400;
  sod = secs % 86400;
  civil_from_days(days, &y, &mo, &d);
  {
    long parts[7] = {y, mo, d, (long)(sod / 3600), (long)(sod % 3600 / 60), (long)(sod % 60),
                     (long)(ms % 1000) * 1000};
    PyObject *args = PyTuple_New(8), *dt;
    int i;
    if (args == NULL) return NULL;
    for (i = 0; i < 7; i++) {
      PyObject *v = PyLong_FromLong(parts[i]);
      if (v == NULL) {
        Py_DECREF(args);
        return NULL;
      }
      PyTuple_SetItem(args, i, v);
    }
    PyTuple_SetItem(args, 7, Py_NewRef(b->utc));
    dt = PyObject_Call(b->datetime, args, NULL);
    Py_DECREF(args);
    return dt;
  }
}

static PyObject *decode(const char *bytes, size_t len) {
  return PyUnicode_DecodeUTF8(len ? bytes : "", (Py_ssize_t)len, NULL);
}

/* The event's topic as str; one decode per run of events on one topic. */
static PyObject *topic_of(Builder *b, const prosody_event *e) {
  Py_ssize_t len = (Py_ssize_t)e->topic_len;
  PyObject *topic;
  char *copy;
  if (b->topic != NULL && len == b->topic_len && (len == 0 || memcmp(e->topic, b->topic_bytes, len) == 0)) {
    Py_INCREF(b->topic);
    return b->topic;
  }
  topic = decode(e->topic, e->topic_len);
  if (topic == NULL) return NULL;
  copy = PyMem_Malloc(len ? len : 1);
  if (copy == NULL) {
    Py_DECREF(topic);
    return PyErr_NoMemory();
  }
  if (len) memcpy(copy, e->topic, len);
  PyMem_Free(b->topic_bytes);
  Py_XDECREF(b->topic);
  b->topic_bytes = copy;
  b->topic_len = len;
  b->topic = topic;
  Py_INCREF(topic);
  return topic;
}

/* The payload, as json.loads(payload) gives it: the scanner on the decoded
 * text when it spans the whole text, json.loads on the bytes otherwise
 * (whitespace around the document, a BOM, bytes that are not UTF-8, invalid
 * JSON), which gives that call's value or error. */
static PyObject *payload_of(Builder *b, const prosody_event *e) {
  PyObject *text, *scanned, *value = NULL, *bytes;
  text = decode((const char *)e->payload, e->payload_len);
  if (text != NULL) {
    scanned = PyObject_CallFunction(b->scan, "On", text, (Py_ssize_t)0);
    if (scanned != NULL && PyTuple_Check(scanned) && PyTuple_Size(scanned) == 2 &&
        PyLong_Check(PyTuple_GetItem(scanned, 1)) &&
        PyLong_AsSsize_t(PyTuple_GetItem(scanned, 1)) == PyUnicode_GetLength(text)) {
      value = PyTuple_GetItem(scanned, 0);
      Py_INCREF(value);
    }
    Py_XDECREF(scanned);
    Py_DECREF(text);
    if (value != NULL) return value;
  }
  if (PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL; /* not a decoding problem */
    PyErr_Clear();
  }
  bytes = PyBytes_FromStringAndSize(e->payload_len ? (const char *)e->payload : "", (Py_ssize_t)e->payload_len);
  if (bytes == NULL) return NULL;
  value = PyObject_CallFunctionObjArgs(b->loads, bytes, NULL);
  Py_DECREF(bytes);
  return value;
}

static int set_item(PyObject *dict, const char *name, const char *bytes, size_t len) {
  PyObject *v = decode(bytes, len);
  int rc;
  if (v == NULL) return -1;
  rc = PyDict_SetItemString(dict, name, v);
  Py_DECREF(v);
  return rc;
}

/* The trace carrier the Python dispatcher built: None when the event has
 * neither traceparent nor baggage; tracestate only beside a traceparent. */
static PyObject *carrier_of(const prosody_event *e) {
  PyObject *carrier;
  if (e->traceparent_len == 0 && e->baggage_len == 0) Py_RETURN_NONE;
  carrier = PyDict_New();
  if (carrier == NULL) return NULL;
  if (e->traceparent_len) {
    if (set_item(carrier, "traceparent", e->traceparent, e->traceparent_len) < 0) goto fail;
    if (e->tracestate_len && set_item(carrier, "tracestate", e->tracestate, e->tracestate_len) < 0) goto fail;
  }
  if (e->baggage_len && set_item(carrier, "baggage", e->baggage, e->baggage_len) < 0) goto fail;
  return carrier;
fail:
  Py_DECREF(carrier);
  return NULL;
}

static PyObject *message_of(Builder *b, const prosody_event *e) {
  PyObject *vals[N_SLOTS] = {NULL}, *m = NULL;
  int i;
  /* In the order the Python dispatcher decoded them, so the first error is the same. */
  if ((vals[SLOT_TOPIC] = topic_of(b, e)) == NULL || (vals[SLOT_KEY] = decode(e->key, e->key_len)) == NULL ||
      (vals[SLOT_PAYLOAD] = payload_of(b, e)) == NULL ||
      (vals[SLOT_PARTITION] = PyLong_FromLong(e->partition)) == NULL ||
      (vals[SLOT_OFFSET] = PyLong_FromLongLong(e->offset)) == NULL) {
    goto done;
  }
  if (b->ts == NULL || e->timestamp_ms != b->ts_ms) {
    PyObject *ts = utc_datetime(b, e->timestamp_ms);
    if (ts == NULL) goto done;
    SETREF(b->ts, ts);
    b->ts_ms = e->timestamp_ms;
  }
  vals[SLOT_TIMESTAMP] = b->ts;
  Py_INCREF(b->ts);
  m = b->message_alloc(b->message, 0);
  if (m == NULL) goto done;
  for (i = 0; i < N_SLOTS; i++) {
    if (b->slot_set[i](b->slots[i], m, vals[i]) < 0) {
      Py_CLEAR(m);
      goto done;
    }
  }
done:
  for (i = 0; i < N_SLOTS; i++) Py_XDECREF(vals[i]);
  return m;
}

static PyObject *timer_of(Builder *b, const prosody_event *e) {
  PyObject *key, *time, *timer;
  key = decode(e->key, e->key_len);
  if (key == NULL) return NULL;
  time = utc_datetime(b, e->time_ms);
  if (time == NULL) {
    Py_DECREF(key);
    return NULL;
  }
  timer = PyObject_CallFunctionObjArgs(b->timer, key, time, NULL);
  Py_DECREF(key);
  Py_DECREF(time);
  return timer;
}

/* A new Context for the event, as Context(dispatcher, event) makes it. */
static PyObject *context_of(Builder *b, PyObject *event) {
  PyObject *ctx = b->context_alloc(b->context, 0);
  Py_ssize_t i;
  if (ctx == NULL) return NULL;
  for (i = 0; i < b->n_context_slots; i++) {
    PyObject *v = i == b->slot_disp ? b->dispatcher : i == b->slot_event ? event : b->context_initial[i];
    if (b->context_set[i](b->context_slots[i], ctx, v) < 0) {
      Py_DECREF(ctx);
      return NULL;
    }
  }
  return ctx;
}

/* Takes the exception being raised (normalised) and clears it. (The
 * stable ABI of 3.10 has no PyErr_GetRaisedException.) */
static PyObject *raised_exception(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
}

/* A row tuple from its parts (references stolen, released on failure). */
static PyObject *pack_row(PyObject *event, long kind, PyObject *item, PyObject *carrier, PyObject *ctx) {
  PyObject *k = PyLong_FromLong(kind), *row = k ? PyTuple_New(5) : NULL;
  if (row == NULL) {
    Py_XDECREF(k);
    Py_DECREF(event);
    Py_DECREF(item);
    Py_DECREF(carrier);
    Py_DECREF(ctx);
    return NULL;
  }
  PyTuple_SetItem(row, 0, event);
  PyTuple_SetItem(row, 1, k);
  PyTuple_SetItem(row, 2, item);
  PyTuple_SetItem(row, 3, carrier);
  PyTuple_SetItem(row, 4, ctx);
  return row;
}

/* One row: (event, kind, item, carrier, context). An event that cannot be
 * built gets a row carrying the exception instead, so that the batch's
 * other events are not lost with it: KIND_FAILED for an Exception (an
 * undecodable event, which the handler's failure reports), KIND_INTERRUPTED
 * for KeyboardInterrupt and the like (the event is retried). */
static PyObject *row_of(Builder *b, const prosody_event *e) {
  PyObject *event, *item, *carrier = NULL, *ctx = NULL, *value;
  long kind = e->kind;
  event = PyLong_FromUnsignedLongLong(e->event);
  if (event == NULL) return NULL;
  if (kind == PROSODY_EVENT_CANCELLED || kind == PROSODY_EVENT_EXPIRED) {
    return pack_row(event, kind, Py_NewRef(Py_None), Py_NewRef(Py_None), Py_NewRef(Py_None));
  }
  item = kind == PROSODY_EVENT_MESSAGE ? message_of(b, e) : timer_of(b, e);
  if (item != NULL) carrier = carrier_of(e);
  if (carrier != NULL) ctx = context_of(b, event);
  if (ctx != NULL) return pack_row(event, kind, item, carrier, ctx);
  Py_XDECREF(item);
  Py_XDECREF(carrier);
  kind = PyErr_ExceptionMatches(PyExc_Exception) ? KIND_FAILED : KIND_INTERRUPTED;
  value = raised_exception();
  if (value == NULL) {
    Py_DECREF(event);
    return NULL;
  }
  return pack_row(event, kind, value, Py_NewRef(Py_None), Py_NewRef(Py_None));
}

static PyObject *Builder_build(Builder *b, PyObject *arg) {
  Py_ssize_t n = PyLong_AsSsize_t(arg), i;
  PyObject *rows;
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (b->events == NULL || b->context == NULL) {
    PyErr_SetString(PyExc_ValueError, "build: the Builder is not initialised");
    return NULL;
  }
  if (n < 0 || n > b->capacity) {
    return PyErr_Format(PyExc_ValueError, "build: n must be between 0 and %zd, got %zd", b->capacity, n);
  }
  rows = PyList_New(n);
  if (rows == NULL) return NULL;
  for (i = 0; i < n; i++) {
    PyObject *row = row_of(b, &b->events[i]);
    if (row == NULL) {
      Py_DECREF(rows);
      return NULL;
    }
    PyList_SetItem(rows, i, row);
  }
  return rows;
}

static void context_slots_free(Builder *b) {
  Py_ssize_t i;
  for (i = 0; i < b->n_context_slots; i++) {
    Py_CLEAR(b->context_slots[i]);
    Py_CLEAR(b->context_initial[i]);
  }
  PyMem_Free(b->context_slots);
  PyMem_Free(b->context_initial);
  PyMem_Free(b->context_set);
  b->context_slots = b->context_initial = NULL;
  b->context_set = NULL;
  b->n_context_slots = 0;
  Py_CLEAR(b->context);
}

/* Reads the Context class's __slots__: each must be _disp, _event or a key
 * of initial, so that a slot added to the class without a starting value
 * here fails at once rather than as an AttributeError in a handler. */
static int context_slots_init(Builder *b, PyObject *context, PyObject *initial) {
  PyObject *names = PyObject_GetAttrString(context, "__slots__"), *seq;
  Py_ssize_t n, i;
  if (names == NULL) return -1;
  seq = PySequence_Tuple(names);
  Py_DECREF(names);
  if (seq == NULL) return -1;
  context_slots_free(b);
  n = PyTuple_Size(seq);
  b->context_slots = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
  b->context_initial = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
  b->context_set = PyMem_Calloc(n ? n : 1, sizeof(descrsetfunc));
  if (b->context_slots == NULL || b->context_initial == NULL || b->context_set == NULL) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  b->n_context_slots = n;
  b->slot_disp = b->slot_event = -1;
  for (i = 0; i < n; i++) {
    PyObject *name = PyTuple_GetItem(seq, i), *descr;
    if (!PyUnicode_Check(name)) {
      PyErr_SetString(PyExc_TypeError, "Builder: context.__slots__ must hold names");
      goto fail;
    }
    if (PyUnicode_CompareWithASCIIString(name, "_disp") == 0) {
      b->slot_disp = i;
    } else if (PyUnicode_CompareWithASCIIString(name, "_event") == 0) {
      b->slot_event = i;
    } else {
      PyObject *v = PyDict_GetItemWithError(initial, name);
      if (v == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "Builder: no initial value for Context.%U", name);
        goto fail;
      }
      Py_INCREF(v);
      b->context_initial[i] = v;
    }
    descr = PyObject_GetAttr(context, name);
    if (descr == NULL) goto fail;
    b->context_slots[i] = descr;
    b->context_set[i] = (descrsetfunc)PyType_GetSlot(Py_TYPE(descr), Py_tp_descr_set);
    if (b->context_set[i] == NULL) {
      PyErr_Format(PyExc_TypeError, "Builder: Context.%U is not a slot", name);
      goto fail;
    }
  }
  Py_DECREF(seq);
  if (b->slot_disp < 0 || b->slot_event < 0) {
    PyErr_SetString(PyExc_TypeError, "Builder: Context needs the slots _disp and _event");
    return -1;
  }
  Py_INCREF(context);
  b->context = (PyTypeObject *)context;
  b->context_alloc = (allocfunc)PyType_GetSlot(b->context, Py_tp_alloc);
  return 0;
fail:
  Py_DECREF(seq);
  return -1;
}

static int Builder_init(Builder *b, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"buffer",  "address",    "capacity",        "message", "timer", "scan", "loads",
                           "fromtimestamp", "utc", "context", "context_initial", "dispatcher", NULL};
  PyObject *buffer, *address, *message, *timer, *scan, *loads, *fromtimestamp, *utc, *context, *initial,
      *dispatcher;
  Py_ssize_t capacity;
  void *events;
  int i;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOnOOOOOOOO!O:Builder", kwlist, &buffer, &address, &capacity,
                                   &message, &timer, &scan, &loads, &fromtimestamp, &utc, &context,
                                   &PyDict_Type, &initial, &dispatcher)) {
    return -1;
  }
  /* Until this init succeeds, build refuses (a failed re-init leaves no half state). */
  b->events = NULL;
  b->capacity = 0;
  if (!PyType_Check(message) || !PyType_Check(context)) {
    PyErr_SetString(PyExc_TypeError, "Builder: message and context must be classes");
    return -1;
  }
  if (context_slots_init(b, context, initial) < 0) return -1;
  Py_INCREF(dispatcher);
  SETREF(b->dispatcher, dispatcher);
  events = PyLong_AsVoidPtr(address);
  if (events == NULL && PyErr_Occurred()) return -1;
  if (events == NULL || capacity < 0) {
    PyErr_SetString(PyExc_ValueError, "Builder: address must be the polled array and capacity >= 0");
    return -1;
  }
  for (i = 0; i < N_SLOTS; i++) {
    PyObject *descr = PyObject_GetAttrString(message, slot_names[i]);
    descrsetfunc set;
    if (descr == NULL) return -1;
    set = (descrsetfunc)PyType_GetSlot(Py_TYPE(descr), Py_tp_descr_set);
    if (set == NULL) {
      Py_DECREF(descr);
      PyErr_Format(PyExc_TypeError, "Builder: message.%s is not a slot", slot_names[i]);
      return -1;
    }
    SETREF(b->slots[i], descr);
    b->slot_set[i] = set;
  }
  {
    /* datetime.fromtimestamp is bound to the class the fast path calls. */
    PyObject *cls = PyObject_GetAttrString(fromtimestamp, "__self__");
    if (cls == NULL) return -1;
    if (!PyType_Check(cls)) {
      Py_DECREF(cls);
      PyErr_SetString(PyExc_TypeError, "Builder: fromtimestamp must be a class's bound fromtimestamp");
      return -1;
    }
    SETREF(b->datetime, cls);
  }
  Py_INCREF(buffer);
  SETREF(b->buffer, buffer);
  Py_INCREF(message);
  SETREF(b->message, (PyTypeObject *)message);
  b->message_alloc = (allocfunc)PyType_GetSlot(b->message, Py_tp_alloc);
  Py_INCREF(timer);
  SETREF(b->timer, timer);
  Py_INCREF(scan);
  SETREF(b->scan, scan);
  Py_INCREF(loads);
  SETREF(b->loads, loads);
  Py_INCREF(fromtimestamp);
  SETREF(b->fromtimestamp, fromtimestamp);
  Py_INCREF(utc);
  SETREF(b->utc, utc);
  b->events = (const prosody_event *)events;
  b->capacity = capacity;
  return 0;
}

/* The single references a Builder owns, for traverse and clear (the
 * Context slot arrays are walked beside them). */
#define BUILDER_REFS(X) \
  X(buffer) X(message) X(timer) X(scan) X(loads) X(fromtimestamp) X(datetime) X(utc) X(context) X(dispatcher) \
      X(topic) X(ts)

static int Builder_traverse(Builder *b, visitproc visit, void *arg) {
  Py_ssize_t i;
  Py_VISIT(Py_TYPE(b)); /* a heap type, owned by its instances */
#define VISIT(field) Py_VISIT(b->field);
  BUILDER_REFS(VISIT)
#undef VISIT
  for (i = 0; i < N_SLOTS; i++) Py_VISIT(b->slots[i]);
  for (i = 0; i < b->n_context_slots; i++) {
    Py_VISIT(b->context_slots[i]);
    Py_VISIT(b->context_initial[i]);
  }
  return 0;
}

static int Builder_clear(Builder *b) {
  int i;
  for (i = 0; i < N_SLOTS; i++) Py_CLEAR(b->slots[i]);
  context_slots_free(b);
#define CLEAR(field) Py_CLEAR(b->field);
  BUILDER_REFS(CLEAR)
#undef CLEAR
  PyMem_Free(b->topic_bytes);
  b->topic_bytes = NULL;
  b->events = NULL;
  b->capacity = 0;
  return 0;
}

static void Builder_dealloc(Builder *b) {
  PyTypeObject *type = Py_TYPE(b);
  PyObject_GC_UnTrack(b);
  Builder_clear(b);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(b);
  Py_DECREF(type);
}

static PyMethodDef Builder_methods[] = {
    {"build", (PyCFunction)Builder_build, METH_O,
     "build(n) -> list of (event, kind, item, carrier, context) for the first n polled events"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot builder_slots[] = {
    {Py_tp_doc, (void *)"Builds the Python objects of polled events (see the module docstring)."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Builder_init},
    {Py_tp_dealloc, (void *)Builder_dealloc},
    {Py_tp_traverse, (void *)Builder_traverse},
    {Py_tp_clear, (void *)Builder_clear},
    {Py_tp_methods, Builder_methods},
    {0, NULL},
};

static PyType_Spec builder_spec = {
    .name = "prosody._batch.Builder",
    .basicsize = sizeof(Builder),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = builder_slots,
};

static struct PyModuleDef batch_module = {
    PyModuleDef_HEAD_INIT, .m_name = "prosody._batch",
    .m_doc = "Turns a polled batch of prosody_event into Python objects in one call.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__batch(void) {
  PyObject *m, *type;
  m = PyModule_Create(&batch_module);
  if (m == NULL) return NULL;
  type = PyType_FromSpec(&builder_spec);
  /* The module takes its own reference to the type (AddObjectRef): this
   * one is dropped whatever happens after. */
  if (type == NULL || PyModule_AddObjectRef(m, "Builder", type) < 0 ||
      PyModule_AddIntConstant(m, "KIND_FAILED", KIND_FAILED) < 0 ||
      PyModule_AddIntConstant(m, "KIND_INTERRUPTED", KIND_INTERRUPTED) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return NULL;
  }
  Py_DECREF(type);
  return m;
}
