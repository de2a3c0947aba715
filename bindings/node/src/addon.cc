// The native half of @prosody-events/prosody: a thin node-addon-api layer
// over the C ABI in include/prosody.h. The JavaScript glue (lib/*.js) holds
// the public API; this file only moves data across the boundary.
//
// Threads. libprosody calls completions and log callbacks on its own
// threads. Those callbacks never touch V8: they copy what they got into a
// queue and wake the JS thread through one uv_async_t (many completions,
// one wake-up). Ready events are not pushed at all: the JS loop watches the
// client's wake-up fd with uv_poll_t and drains it with prosody_client_poll,
// handing JS one batch per poll (numbers in a shared Float64Array, keys in
// one array, ASCII payloads in one string). Event outcomes from JS are buffered and sent with one
// prosody_events_complete right after each batch's callback, and once per
// loop turn for outcomes that come later.
#include <napi.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "prosody.h"

namespace {

// ---------------------------------------------------------------------------
// Errors

Napi::Error StatusError(Napi::Env env, int status, const char* message) {
  Napi::Error err = Napi::Error::New(env, message && *message ? message : prosody_status_name(status));
  err.Set("status", Napi::Number::New(env, status));
  err.Set("code", Napi::String::New(env, prosody_status_name(status)));
  return err;
}

// Takes ownership of a library-allocated error message.
Napi::Error TakeError(Napi::Env env, int status, char* message) {
  Napi::Error err = StatusError(env, status, message);
  prosody_free(message);
  return err;
}

// ---------------------------------------------------------------------------
// Per-environment dispatcher: library threads -> JS thread.

struct Dispatch;

// One asynchronous operation: its Promise and, once the library called
// back, its result. Created and settled on the JS thread; the library
// thread only fills status/message/times and queues it.
struct Op {
  Dispatch* dispatch;
  Napi::Promise::Deferred deferred;
  int status = PROSODY_OK;
  std::string message;
  bool wantTimes = false;
  std::vector<int64_t> times;
  // Runs on the JS thread before the Promise settles (e.g. stop polling
  // once an unsubscribe finished). Holds a strong reference when set.
  void (*after)(Op* op, int status) = nullptr;
  void* afterSelf = nullptr;
  uint64_t afterTag = 0;  // for after: what the operation started from

  Op(Dispatch* d, Napi::Env env) : dispatch(d), deferred(Napi::Promise::Deferred::New(env)) {}
  virtual ~Op() = default;

  // JS thread: what the Promise resolves to, or rejects with.
  virtual Napi::Value Result(Napi::Env e) {
    if (!wantTimes) return e.Undefined();
    Napi::Array arr = Napi::Array::New(e, times.size());
    for (size_t i = 0; i < times.size(); i++) arr.Set(i, Napi::Number::New(e, (double)times[i]));
    return arr;
  }
  virtual Napi::Value Failure(Napi::Env e);
};

struct LogItem {
  int32_t level;
  int64_t timeMs;
  std::string target, message, attributes;
};

struct Dispatch {
  napi_env env = nullptr;
  uv_loop_t* loop = nullptr;
  uv_async_t async;
  uv_idle_t idle;
  bool idleActive = false;
  bool closed = false;  // guarded by mu as seen from library threads

  std::mutex mu;
  std::vector<Op*> done;
  std::vector<LogItem> logs;

  // Operations awaiting their callback. The async handle keeps the process
  // alive only while this is positive: a pending send must finish before
  // Node exits, but an idle client must not hold the process.
  int pending = 0;

  // Buffered event outcomes, completed after each batch's callback (its
  // handlers' microtasks have run by then) and once per loop turn.
  std::vector<prosody_completion> completions;
  std::deque<std::string> completionMessages;

  // Keyed-state handles JS released: released after the next completion
  // flush, so that an attempt's handles outlive its completion.
  std::vector<uint64_t> stateReleases;
  // Constructors of the keyed-state classes (src: the State section).
  Napi::FunctionReference stateCtor, cursorCtor, readerCtor;

  Napi::FunctionReference logSink;  // JS function(level, timeMs, target, message, attributes)
  napi_async_context asyncContext = nullptr;  // for the callback scope settling Promises

  void Begin() {
    if (pending++ == 0) uv_ref(reinterpret_cast<uv_handle_t*>(&async));
  }
  void End() {
    if (--pending == 0) uv_unref(reinterpret_cast<uv_handle_t*>(&async));
  }

  // Library thread.
  void Push(Op* op) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return;  // the environment is gone; drop it
      done.push_back(op);
    }
    uv_async_send(&async);
  }

  // Library thread.
  void PushLog(LogItem&& item) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return;
      logs.push_back(std::move(item));
    }
    uv_async_send(&async);
  }

  // Successful outcomes are written by JS straight into a shared buffer
  // (lib/events.js): okIds[0..okCount[0]) are event handles, no native
  // call per event. JS calls armCompletions() when it writes the first one,
  // so that a flush is due. Failures, which carry a message, go through
  // complete() and QueueCompletion.
  static constexpr uint32_t kOkCapacity = 4096;
  double* okIds = nullptr;
  int32_t* okCount = nullptr;

  void Arm() {
    if (!idleActive) {
      idleActive = true;
      uv_idle_start(&idle, [](uv_idle_t* h) {
        auto* d = static_cast<Dispatch*>(h->data);
        d->FlushCompletions();
      });
    }
  }

  void QueueCompletion(uint64_t id, int32_t outcome, const char* message) {
    prosody_completion c{id, outcome, nullptr};
    if (message != nullptr) {
      completionMessages.emplace_back(message);
    }
    completions.push_back(c);
    if (message != nullptr) completions.back().message = completionMessages.back().c_str();
    Arm();
  }

  // Completes the buffered outcomes with one prosody_events_complete, on
  // this thread. Handing them to a completion thread instead was measured
  // to halve throughput: the extra wake-up adds to every event's round
  // trip, and each event holds a max_concurrency slot until its completion
  // arrives.
  void FlushCompletions() {
    if (idleActive) {
      uv_idle_stop(&idle);
      idleActive = false;
    }
    if (okCount != nullptr && *okCount > 0) {
      int32_t n = std::min<int32_t>(*okCount, kOkCapacity);
      for (int32_t i = 0; i < n; i++) {
        completions.push_back(prosody_completion{static_cast<uint64_t>(okIds[i]), PROSODY_OUTCOME_OK, nullptr});
      }
      *okCount = 0;
    }
    if (!completions.empty()) {
      char* err = nullptr;
      // A failing item (a handle whose client was released meanwhile) does
      // not stop the others; there is nobody left to tell about it.
      prosody_events_complete(completions.data(), completions.size(), sizeof(prosody_completion), &err);
      prosody_free(err);
      completions.clear();
      completionMessages.clear();
    }
    if (!stateReleases.empty()) {
      for (uint64_t h : stateReleases) prosody_state_release(h, nullptr);
      stateReleases.clear();
    }
  }

  void QueueStateRelease(uint64_t h) {
    stateReleases.push_back(h);
    Arm();
  }

  // JS thread: settle what the library finished, deliver log records.
  void Drain() {
    std::vector<Op*> ops;
    std::vector<LogItem> items;
    {
      std::lock_guard<std::mutex> lock(mu);
      ops.swap(done);
      items.swap(logs);
    }
    Napi::Env e(env);
    Napi::HandleScope scope(e);
    // Log records first: they were written before the completions that
    // follow them (an unsubscribe's drain logs precede its completion).
    if (!items.empty() && !logSink.IsEmpty()) {
      for (auto& it : items) {
        try {
          logSink.MakeCallback(e.Global(), {Napi::Number::New(e, it.level), Napi::Number::New(e, (double)it.timeMs),
                                            Napi::String::New(e, it.target), Napi::String::New(e, it.message),
                                            Napi::String::New(e, it.attributes)});
        } catch (const Napi::Error& err) {
          napi_fatal_exception(env, err.Value());
        }
      }
    }
    if (!ops.empty()) {
      // Settling runs user continuations (as microtasks); a callback scope
      // makes Node run them when it closes and report their errors as usual.
      Napi::CallbackScope cbScope(e, asyncContext);
      for (Op* op : ops) Settle(e, op);
    }
  }

  void Settle(Napi::Env e, Op* op) {
    End();
    if (op->after) op->after(op, op->status);
    if (op->status == PROSODY_OK) {
      op->deferred.Resolve(op->Result(e));
    } else {
      op->deferred.Reject(op->Failure(e));
    }
    delete op;
  }
};

Napi::Value Op::Failure(Napi::Env e) { return StatusError(e, status, message.c_str()).Value(); }

Dispatch* GetDispatch(Napi::Env env) { return env.GetInstanceData<Dispatch>(); }

// Library-thread callbacks.
void OnDone(void* ud, int status, const char* message) {
  Op* op = static_cast<Op*>(ud);
  op->status = status;
  if (message) op->message = message;
  op->dispatch->Push(op);
}

void OnTimes(void* ud, int status, const int64_t* times, size_t count, const char* message) {
  Op* op = static_cast<Op*>(ud);
  op->status = status;
  if (message) op->message = message;
  if (times) op->times.assign(times, times + count);
  op->dispatch->Push(op);
}

Dispatch* logDispatch = nullptr;  // the environment that receives log records

void OnLog(void* ud, const prosody_log_record* r) {
  LogItem item{r->level, r->time_ms, r->target ? r->target : "", r->message ? r->message : "",
               r->attributes ? r->attributes : ""};
  static_cast<Dispatch*>(ud)->PushLog(std::move(item));
}

// Runs an operation: fn gets the Op as user data and returns a status; on
// immediate failure the Promise is rejected at once (as op->Failure says).
template <typename F>
Napi::Value RunOp(Napi::Env env, Op* op, F fn) {
  Dispatch* d = op->dispatch;
  Napi::Promise promise = op->deferred.Promise();
  char* err = nullptr;
  d->Begin();
  int status = fn(op, &err);
  if (status != PROSODY_OK) {
    d->End();
    op->status = status;
    if (err != nullptr) op->message = err;
    prosody_free(err);
    op->deferred.Reject(op->Failure(env));
    delete op;
  }
  return promise;
}

template <typename F>
Napi::Value StartOp(Napi::Env env, F fn, bool wantTimes = false) {
  Op* op = new Op(GetDispatch(env), env);
  op->wantTimes = wantTimes;
  return RunOp(env, op, fn);
}

std::string StringArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (!info[i].IsString()) throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a string");
  return info[i].As<Napi::String>().Utf8Value();
}

uint64_t HandleArg(const Napi::CallbackInfo& info, size_t i) {
  return static_cast<uint64_t>(info[i].As<Napi::Number>().Int64Value());
}


// ---------------------------------------------------------------------------
// Keyed state (include/prosody.h, "Keyed state"): native state handles,
// cursors and published readers for lib/state.js (node-api.md §10). Items
// cross as JSON text. Every operation takes a trailing carrier, which the
// C ABI has no use for. Errors carry their category for the glue as
// error.cause.message: "permanent" or "transient".

const char* StateCategory(int status) {
  switch (status) {
    case PROSODY_ERR_PERMANENT:  // not registered, another kind
    case PROSODY_ERR_STATE:      // the client has no keyed state
    case PROSODY_ERR_CLOSED:     // the client was shut down
    case PROSODY_ERR_CONFIG:
      return "permanent";
    default:  // the store, a stale handle, a bad item or argument, TERMINAL
      return "transient";
  }
}

Napi::Error StateError(Napi::Env env, int status, const char* message) {
  Napi::Error err = StatusError(env, status, message);
  err.Set("cause", Napi::Error::New(env, StateCategory(status)).Value());
  return err;
}

Napi::Error TakeStateError(Napi::Env env, int status, char* message) {
  Napi::Error err = StateError(env, status, message);
  prosody_free(message);
  return err;
}

const char kExpired[] = "the keyed-state handle is no longer valid because its event attempt has ended";

// What a state operation resolves to.
enum class Shape : uint8_t {
  kVoid,     // undefined
  kItem,     // the value's text, or null (n = 0, or no value)
  kItems,    // one text or null per item (getMany)
  kBool,     // number != 0
  kNumber,   // number
  kEntries,  // a chunk of map entries: [key, value][], or null at the end
  kKeys,     // a chunk of keys: string[], or null
  kValues,   // a chunk of values: string[], or null
};

struct StateItem {
  std::string key, value;
  bool hasValue = false;
};

struct StateOp : Op {
  Shape shape;
  uint64_t number = 0;
  std::vector<StateItem> items;
  // The arguments, kept until the library reported.
  std::string userKey, argKey, argValue;  // userKey: a reader's
  std::vector<std::string> argKeys;
  std::vector<prosody_state_item> argItems;

  StateOp(Dispatch* d, Napi::Env env, Shape s) : Op(d, env), shape(s) {}

  static Napi::Value Text(Napi::Env e, const StateItem& it) {
    if (!it.hasValue) return e.Null();
    return Napi::String::New(e, it.value.data(), it.value.size());
  }

  Napi::Value Result(Napi::Env e) override {
    switch (shape) {
      case Shape::kVoid:
        return e.Undefined();
      case Shape::kBool:
        return Napi::Boolean::New(e, number != 0);
      case Shape::kNumber:
        return Napi::Number::New(e, static_cast<double>(number));
      case Shape::kItem:
        return items.empty() ? e.Null() : Text(e, items[0]);
      case Shape::kItems: {
        Napi::Array arr = Napi::Array::New(e, items.size());
        for (size_t i = 0; i < items.size(); i++) arr.Set(i, Text(e, items[i]));
        return arr;
      }
      default:
        break;
    }
    if (items.empty()) return e.Null();  // the scan is over
    Napi::Array arr = Napi::Array::New(e, items.size());
    for (size_t i = 0; i < items.size(); i++) {
      const StateItem& it = items[i];
      if (shape == Shape::kKeys) {
        arr.Set(i, Napi::String::New(e, it.key.data(), it.key.size()));
      } else if (shape == Shape::kValues) {
        arr.Set(i, Text(e, it));
      } else {
        Napi::Array entry = Napi::Array::New(e, 2);
        entry.Set(0u, Napi::String::New(e, it.key.data(), it.key.size()));
        entry.Set(1u, Text(e, it));
        arr.Set(i, entry);
      }
    }
    return arr;
  }

  Napi::Value Failure(Napi::Env e) override { return StateError(e, status, message.c_str()).Value(); }

  prosody_state_args Args() {
    prosody_state_args a{};
    a.size = sizeof a;
    return a;
  }
};

// Library thread.
void OnState(void* ud, int status, const prosody_state_item* items, size_t n, uint64_t number, const char* message) {
  auto* op = static_cast<StateOp*>(ud);
  op->status = status;
  if (message) op->message = message;
  if (status == PROSODY_OK) {
    op->number = number;
    op->items.resize(n);
    for (size_t i = 0; i < n; i++) {
      StateItem& it = op->items[i];
      if (items[i].key != nullptr) it.key.assign(items[i].key, items[i].key_len);
      if (items[i].value != nullptr) {
        it.value.assign(reinterpret_cast<const char*>(items[i].value), items[i].value_len);
        it.hasValue = true;
      }
    }
  }
  op->dispatch->Push(op);
}

// A rejected Promise, for failures found before reaching the library.
Napi::Value Rejected(Napi::Env env, int status, const char* message) {
  Napi::Promise::Deferred d = Napi::Promise::Deferred::New(env);
  d.Reject(StateError(env, status, message).Value());
  return d.Promise();
}

int Direction(const Napi::Value& v) {
  if (v.IsString()) {
    std::string d = v.As<Napi::String>().Utf8Value();
    if (d == "forward") return PROSODY_STATE_FORWARD;
    if (d == "backward") return PROSODY_STATE_BACKWARD;
  } else if (v.IsUndefined()) {
    return PROSODY_STATE_FORWARD;
  }
  return -1;  // refused by the library: its message names both directions
}

// A cursor of a scan: nextChunk(carrier) resolves to an array of items or
// null once the scan is over; close() releases it.
class NativeCursor : public Napi::ObjectWrap<NativeCursor> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "NativeCursor",
                       {InstanceMethod("nextChunk", &NativeCursor::NextChunk), InstanceMethod("close", &NativeCursor::Close)});
  }

  // new NativeCursor(handle, shape)
  explicit NativeCursor(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeCursor>(info) {
    handle_ = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
    shape_ = static_cast<Shape>(info[1].As<Napi::Number>().Int32Value());
  }

  ~NativeCursor() override {
    if (handle_ != 0) prosody_cursor_release(handle_, nullptr);
  }

  static Napi::Value New(Napi::Env env, uint64_t handle, Shape shape) {
    return GetDispatch(env)->cursorCtor.New(
        {Napi::Number::New(env, static_cast<double>(handle)), Napi::Number::New(env, static_cast<int>(shape))});
  }

 private:
  uint64_t handle_ = 0;
  Shape shape_;

  Napi::Value NextChunk(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (handle_ == 0) return Rejected(env, PROSODY_ERR_TRANSIENT, "the scan is closed");
    uint64_t h = handle_;
    return RunOp(env, new StateOp(GetDispatch(env), env, shape_),
                 [&](Op* op, char** err) { return prosody_cursor_next(h, OnState, op, err); });
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (handle_ != 0) {
      prosody_cursor_release(handle_, nullptr);
      handle_ = 0;
    }
    return info.Env().Undefined();
  }
};

// An attempt's handle of one collection (prosody_event_state). One class
// for the three kinds; `get` and `set` read their arguments by kind.
class NativeState : public Napi::ObjectWrap<NativeState> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "NativeState",
                       {
                           InstanceMethod("get", &NativeState::Get),
                           InstanceMethod("set", &NativeState::Set),
                           InstanceMethod("clear", &NativeState::Plain<PROSODY_STATE_CLEAR, Shape::kVoid>),
                           InstanceMethod("commit", &NativeState::Plain<PROSODY_STATE_COMMIT, Shape::kVoid>),
                           InstanceMethod("rollback", &NativeState::Plain<PROSODY_STATE_ROLLBACK, Shape::kVoid>),
                           InstanceMethod("contains", &NativeState::Keyed<PROSODY_STATE_CONTAINS, Shape::kBool>),
                           InstanceMethod("remove", &NativeState::Keyed<PROSODY_STATE_REMOVE, Shape::kVoid>),
                           InstanceMethod("getMany", &NativeState::GetMany),
                           InstanceMethod("pushBack", &NativeState::Push<PROSODY_STATE_PUSH_BACK>),
                           InstanceMethod("pushFront", &NativeState::Push<PROSODY_STATE_PUSH_FRONT>),
                           InstanceMethod("popBack", &NativeState::Plain<PROSODY_STATE_POP_BACK, Shape::kItem>),
                           InstanceMethod("popFront", &NativeState::Plain<PROSODY_STATE_POP_FRONT, Shape::kItem>),
                           InstanceMethod("peekBack", &NativeState::Plain<PROSODY_STATE_PEEK_BACK, Shape::kItem>),
                           InstanceMethod("peekFront", &NativeState::Plain<PROSODY_STATE_PEEK_FRONT, Shape::kItem>),
                           InstanceMethod("len", &NativeState::Plain<PROSODY_STATE_LEN, Shape::kNumber>),
                           InstanceMethod("isEmpty", &NativeState::Plain<PROSODY_STATE_IS_EMPTY, Shape::kBool>),
                           InstanceMethod("scan", &NativeState::Scan<false>),
                           InstanceMethod("keys", &NativeState::Scan<true>),
                           InstanceMethod("release", &NativeState::Release),
                       });
  }

  // new NativeState(handle, kind)
  explicit NativeState(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeState>(info) {
    handle_ = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
    kind_ = info[1].As<Napi::Number>().Int32Value();
  }

  ~NativeState() override {
    if (handle_ != 0) prosody_state_release(handle_, nullptr);
  }

 private:
  uint64_t handle_ = 0;
  int kind_ = 0;

  template <typename F>
  Napi::Value Call(Napi::Env env, int op, Shape shape, F fill) {
    if (handle_ == 0) return Rejected(env, PROSODY_ERR_TRANSIENT, kExpired);
    auto* sop = new StateOp(GetDispatch(env), env, shape);
    prosody_state_args args = sop->Args();
    fill(sop, args);
    uint64_t h = handle_;
    return RunOp(env, sop, [&](Op* o, char** err) { return prosody_state_call(h, op, &args, OnState, o, err); });
  }

  static void Text(const Napi::Value& v, std::string& out) {
    if (v.IsString()) out = v.As<Napi::String>().Utf8Value();
  }

  template <int OP, Shape S>
  Napi::Value Plain(const Napi::CallbackInfo& info) {
    return Call(info.Env(), OP, S, [](StateOp*, prosody_state_args&) {});
  }

  // op(key, carrier)
  template <int OP, Shape S>
  Napi::Value Keyed(const Napi::CallbackInfo& info) {
    return Call(info.Env(), OP, S, [&](StateOp* op, prosody_state_args& a) {
      Text(info[0], op->argKey);
      a.key = op->argKey.data();
      a.key_len = op->argKey.size();
    });
  }

  // value: get(carrier); map: get(key, carrier); deque: get(index, carrier)
  Napi::Value Get(const Napi::CallbackInfo& info) {
    return Call(info.Env(), PROSODY_STATE_GET, Shape::kItem, [&](StateOp* op, prosody_state_args& a) {
      if (kind_ == PROSODY_STATE_MAP) {
        Text(info[0], op->argKey);
        a.key = op->argKey.data();
        a.key_len = op->argKey.size();
      } else if (kind_ == PROSODY_STATE_DEQUE && info[0].IsNumber()) {
        a.index = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
      }
    });
  }

  // value: set(text, carrier); map: set(key, text, carrier)
  Napi::Value Set(const Napi::CallbackInfo& info) {
    return Call(info.Env(), PROSODY_STATE_SET, Shape::kVoid, [&](StateOp* op, prosody_state_args& a) {
      size_t v = 0;
      if (kind_ == PROSODY_STATE_MAP) {
        Text(info[0], op->argKey);
        a.key = op->argKey.data();
        a.key_len = op->argKey.size();
        v = 1;
      }
      Text(info[v], op->argValue);
      a.value = reinterpret_cast<const uint8_t*>(op->argValue.data());
      a.value_len = op->argValue.size();
    });
  }

  // pushBack(text, carrier), pushFront(text, carrier)
  template <int OP>
  Napi::Value Push(const Napi::CallbackInfo& info) {
    return Call(info.Env(), OP, Shape::kVoid, [&](StateOp* op, prosody_state_args& a) {
      Text(info[0], op->argValue);
      a.value = reinterpret_cast<const uint8_t*>(op->argValue.data());
      a.value_len = op->argValue.size();
    });
  }

  // getMany(keys, carrier)
  Napi::Value GetMany(const Napi::CallbackInfo& info) {
    return Call(info.Env(), PROSODY_STATE_GET_MANY, Shape::kItems, [&](StateOp* op, prosody_state_args& a) {
      FillKeys(info[0], op, a);
    });
  }

 public:
  static void FillKeys(const Napi::Value& v, StateOp* op, prosody_state_args& a) {
    if (!v.IsArray()) return;
    Napi::Array arr = v.As<Napi::Array>();
    uint32_t n = arr.Length();
    op->argKeys.resize(n);
    op->argItems.resize(n);
    for (uint32_t i = 0; i < n; i++) {
      Text(arr.Get(i), op->argKeys[i]);
      op->argItems[i] = prosody_state_item{op->argKeys[i].data(), op->argKeys[i].size(), nullptr, 0};
    }
    a.keys = op->argItems.data();
    a.keys_len = n;
  }

 private:
  // scan(direction, carrier), keys(direction, carrier): a cursor, at once.
  template <bool KeysOnly>
  Napi::Value Scan(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (handle_ == 0) throw StateError(env, PROSODY_ERR_TRANSIENT, kExpired);
    uint64_t cursor = 0;
    char* err = nullptr;
    int status = prosody_state_scan(handle_, Direction(info[0]), KeysOnly ? 1 : 0, &cursor, &err);
    if (status != PROSODY_OK) throw TakeStateError(env, status, err);
    Shape shape = KeysOnly ? Shape::kKeys : (kind_ == PROSODY_STATE_MAP ? Shape::kEntries : Shape::kValues);
    return NativeCursor::New(env, cursor, shape);
  }

  // release(): after the attempt's completion has gone out (Dispatch).
  Napi::Value Release(const Napi::CallbackInfo& info) {
    if (handle_ != 0) {
      GetDispatch(info.Env())->QueueStateRelease(handle_);
      handle_ = 0;
    }
    return info.Env().Undefined();
  }
};

// openState(event, name, kind): the attempt's handle of a collection.
Napi::Value OpenState(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t event = HandleArg(info, 0);
  std::string name = StringArg(info, 1, "name");
  int kind = info[2].As<Napi::Number>().Int32Value();
  uint64_t state = 0;
  char* err = nullptr;
  int status = prosody_event_state(event, name.data(), name.size(), kind, &state, &err);
  if (status == PROSODY_ERR_INVALID_HANDLE) {
    prosody_free(err);
    throw StateError(env, status, kExpired);  // the event was completed
  }
  if (status != PROSODY_OK) throw TakeStateError(env, status, err);
  return GetDispatch(env)->stateCtor.New(
      {Napi::Number::New(env, static_cast<double>(state)), Napi::Number::New(env, kind)});
}

// A published reader (prosody_client_reader). The user key comes first in
// every operation.
class NativeReader : public Napi::ObjectWrap<NativeReader> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "NativeReader",
                       {
                           InstanceMethod("get", &NativeReader::Get),
                           InstanceMethod("getMany", &NativeReader::GetMany),
                           InstanceMethod("contains", &NativeReader::Contains),
                           InstanceMethod("length", &NativeReader::Plain<PROSODY_STATE_LEN, Shape::kNumber>),
                           InstanceMethod("isEmpty", &NativeReader::Plain<PROSODY_STATE_IS_EMPTY, Shape::kBool>),
                           InstanceMethod("peekFront", &NativeReader::Plain<PROSODY_STATE_PEEK_FRONT, Shape::kItem>),
                           InstanceMethod("peekBack", &NativeReader::Plain<PROSODY_STATE_PEEK_BACK, Shape::kItem>),
                           InstanceMethod("scan", &NativeReader::Scan<false>),
                           InstanceMethod("keys", &NativeReader::Scan<true>),
                       });
  }

  // new NativeReader(handle, kind)
  explicit NativeReader(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeReader>(info) {
    handle_ = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
    kind_ = info[1].As<Napi::Number>().Int32Value();
  }

  ~NativeReader() override {
    if (handle_ != 0) prosody_reader_release(handle_, nullptr);
  }

  // open(client, subsystem, name, ttlMs?, disabled, kind)
  static Napi::Value Open(const Napi::CallbackInfo& info, uint64_t client, int kind) {
    Napi::Env env = info.Env();
    std::string subsystem = StringArg(info, 0, "subsystem");
    std::string name = StringArg(info, 1, "name");
    int64_t ttl = -1;  // the client's state_read_cache_ttl
    if (info.Length() > 3 && info[3].IsBoolean() && info[3].As<Napi::Boolean>().Value()) {
      ttl = 0;
    } else if (info.Length() > 2 && info[2].IsNumber()) {
      ttl = info[2].As<Napi::Number>().Int64Value();
      if (ttl < 0) ttl = -1;
    }
    uint64_t reader = 0;
    char* err = nullptr;
    int status = prosody_client_reader(client, subsystem.data(), subsystem.size(), name.data(), name.size(), kind, ttl,
                                       &reader, &err);
    if (status != PROSODY_OK) throw TakeStateError(env, status, err);
    return GetDispatch(env)->readerCtor.New(
        {Napi::Number::New(env, static_cast<double>(reader)), Napi::Number::New(env, kind)});
  }

 private:
  uint64_t handle_ = 0;
  int kind_ = 0;

  template <typename F>
  Napi::Value Call(const Napi::CallbackInfo& info, int op, Shape shape, F fill) {
    Napi::Env env = info.Env();
    auto* sop = new StateOp(GetDispatch(env), env, shape);
    prosody_state_args args = sop->Args();
    if (info[0].IsString()) sop->userKey = info[0].As<Napi::String>().Utf8Value();
    fill(sop, args);
    uint64_t h = handle_;
    const std::string& k = sop->userKey;
    return RunOp(env, sop, [&](Op* o, char** err) {
      return prosody_reader_call(h, k.data(), k.size(), op, &args, OnState, o, err);
    });
  }

  template <int OP, Shape S>
  Napi::Value Plain(const Napi::CallbackInfo& info) {
    return Call(info, OP, S, [](StateOp*, prosody_state_args&) {});
  }

  // value: get(key, c); map: get(key, mapKey, c); deque: get(key, index, c)
  Napi::Value Get(const Napi::CallbackInfo& info) {
    return Call(info, PROSODY_STATE_GET, Shape::kItem, [&](StateOp* op, prosody_state_args& a) {
      if (kind_ == PROSODY_STATE_MAP) {
        if (info[1].IsString()) op->argKey = info[1].As<Napi::String>().Utf8Value();
        a.key = op->argKey.data();
        a.key_len = op->argKey.size();
      } else if (kind_ == PROSODY_STATE_DEQUE && info[1].IsNumber()) {
        a.index = static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value());
      }
    });
  }

  Napi::Value Contains(const Napi::CallbackInfo& info) {
    return Call(info, PROSODY_STATE_CONTAINS, Shape::kBool, [&](StateOp* op, prosody_state_args& a) {
      if (info[1].IsString()) op->argKey = info[1].As<Napi::String>().Utf8Value();
      a.key = op->argKey.data();
      a.key_len = op->argKey.size();
    });
  }

  Napi::Value GetMany(const Napi::CallbackInfo& info) {
    return Call(info, PROSODY_STATE_GET_MANY, Shape::kItems,
                [&](StateOp* op, prosody_state_args& a) { NativeState::FillKeys(info[1], op, a); });
  }

  // scan(key, direction, c), keys(key, direction, c): a Promise of a cursor.
  template <bool KeysOnly>
  Napi::Value Scan(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string key;
    if (info[0].IsString()) key = info[0].As<Napi::String>().Utf8Value();
    uint64_t cursor = 0;
    char* err = nullptr;
    int status = prosody_reader_scan(handle_, key.data(), key.size(), Direction(info[1]), KeysOnly ? 1 : 0, &cursor, &err);
    Napi::Promise::Deferred d = Napi::Promise::Deferred::New(env);
    if (status != PROSODY_OK) {
      d.Reject(TakeStateError(env, status, err).Value());
    } else {
      Shape shape = KeysOnly ? Shape::kKeys : (kind_ == PROSODY_STATE_MAP ? Shape::kEntries : Shape::kValues);
      d.Resolve(NativeCursor::New(env, cursor, shape));
    }
    return d.Promise();
  }
};

// ---------------------------------------------------------------------------
// Client

class Client : public Napi::ObjectWrap<Client> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "NativeClient",
                       {
                           InstanceMethod("send", &Client::Send),
                           InstanceMethod("subscribe", &Client::Subscribe),
                           InstanceMethod("unsubscribe", &Client::Unsubscribe),
                           InstanceMethod("release", &Client::Release),
                           InstanceMethod("consumerState", &Client::ConsumerState),
                           InstanceMethod("sourceSystem", &Client::SourceSystem),
                           InstanceMethod("assignedPartitionCount", &Client::AssignedPartitionCount),
                           InstanceMethod("isStalled", &Client::IsStalled),
                           InstanceMethod("publishedValue", &Client::Published<PROSODY_STATE_VALUE>),
                           InstanceMethod("publishedMap", &Client::Published<PROSODY_STATE_MAP>),
                           InstanceMethod("publishedDeque", &Client::Published<PROSODY_STATE_DEQUE>),
                       });
  }

  explicit Client(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Client>(info), env_(info.Env()) {
    Napi::Env env = info.Env();
    std::string config = StringArg(info, 0, "config");
    char* err = nullptr;
    int status = prosody_client_new(config.c_str(), &handle_, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
  }

  ~Client() override {
    // Garbage-collected without release(): stop watching the fd, then let
    // the library close the client in the background.
    StopPolling();
    if (handle_ != 0) prosody_client_release(handle_, nullptr, nullptr, nullptr);
  }

 private:
  napi_env env_;
  uint64_t handle_ = 0;
  uv_poll_t* poll_ = nullptr;
  Napi::FunctionReference onBatch_;
  bool subscribed_ = false;  // holds a strong reference to the JS object while set
  uint64_t generation_ = 0;  // counts the subscribes the library accepted

  uint64_t Handle(Napi::Env env) {
    if (handle_ == 0) throw StatusError(env, PROSODY_ERR_CLOSED, "the client was shut down");
    return handle_;
  }

  // send(topic, key, payloadJson, traceparent?, tracestate?, baggage?)
  Napi::Value Send(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t h = Handle(env);
    std::string topic = StringArg(info, 0, "topic");
    std::string key = StringArg(info, 1, "key");
    std::string payload = StringArg(info, 2, "payload");
    std::string tp, ts, bg;
    if (info.Length() > 3 && info[3].IsString()) tp = info[3].As<Napi::String>().Utf8Value();
    if (info.Length() > 4 && info[4].IsString()) ts = info[4].As<Napi::String>().Utf8Value();
    if (info.Length() > 5 && info[5].IsString()) bg = info[5].As<Napi::String>().Utf8Value();
    prosody_trace_context trace{};
    trace.size = sizeof trace;
    trace.traceparent = tp.data();
    trace.traceparent_len = tp.size();
    trace.tracestate = ts.data();
    trace.tracestate_len = ts.size();
    trace.baggage = bg.data();
    trace.baggage_len = bg.size();
    bool hasTrace = !tp.empty() || !bg.empty();
    // Lengths, not NUL-terminated strings: a key holding NUL arrives whole.
    return StartOp(env, [&](Op* op, char** err) {
      return prosody_client_send(h, topic.data(), topic.size(), key.data(), key.size(),
                                 reinterpret_cast<const uint8_t*>(payload.data()), payload.size(),
                                 hasTrace ? &trace : nullptr, OnDone, op, err);
    });
  }

  // subscribe(onBatch): onBatch(n, nums, strs, text, topics) is called on
  // the JS thread with each batch of ready items (see Drain).
  Napi::Value Subscribe(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t h = Handle(env);
    if (!info[0].IsFunction()) throw Napi::TypeError::New(env, "onBatch must be a function");
    // The library refuses a second subscribe (STATE); ask it before taking
    // anything over, so that the refusal leaves the running subscription's
    // batch callback and fd watch alone.
    Napi::Function onBatch = info[0].As<Napi::Function>();
    return StartOp(env, [&](Op* op, char** err) {
      op->after = [](Op* op, int status) {
        auto* c = static_cast<Client*>(op->afterSelf);
        // A failed subscribe stops the polling it started, unless a later
        // subscribe has taken it over since.
        if (status != PROSODY_OK && c->generation_ == op->afterTag) c->StopPolling();
      };
      op->afterSelf = this;
      prosody_handler_config cfg{};
      cfg.size = sizeof cfg;
      int status = prosody_client_subscribe(h, &cfg, OnDone, op, err);
      if (status != PROSODY_OK) return status;
      // Accepted: this subscription's events are ours to deliver from now on.
      op->afterTag = ++generation_;
      onBatch_ = Napi::Persistent(onBatch);
      StartPolling(env);
      return status;
    });
  }

  Napi::Value Unsubscribe(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t h = Handle(env);
    return StartOp(env, [&](Op* op, char** err) {
      // Keep polling until the unsubscribe finished: in-flight events still
      // receive cancellation notices and must be completed.
      // Not when a subscribe accepted after this unsubscribe owns the
      // polling by then.
      op->after = [](Op* op, int status) {
        auto* c = static_cast<Client*>(op->afterSelf);
        if (status == PROSODY_OK && c->generation_ == op->afterTag) c->StopPolling();
      };
      op->afterSelf = this;
      op->afterTag = generation_;
      return prosody_client_unsubscribe(h, OnDone, op, err);
    });
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (handle_ == 0) return StartOp(env, [](Op*, char**) { return PROSODY_ERR_CLOSED; });
    uint64_t h = handle_;
    handle_ = 0;
    StopPolling();
    // Outcomes given before the release reach the library before it fails
    // what is left.
    GetDispatch(env)->FlushCompletions();
    return StartOp(env, [&](Op* op, char** err) { return prosody_client_release(h, OnDone, op, err); });
  }

  // publishedValue|Map|Deque(subsystem, name, ttlMs?, disabled): a reader.
  template <int Kind>
  Napi::Value Published(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (handle_ == 0) throw StateError(env, PROSODY_ERR_CLOSED, "the client was shut down");
    return NativeReader::Open(info, handle_, Kind);
  }

  Napi::Value ConsumerState(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    int state = 0;
    char* err = nullptr;
    int status = prosody_client_consumer_state(Handle(env), &state, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
    return Napi::Number::New(env, state);
  }

  Napi::Value SourceSystem(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    char* out = nullptr;
    char* err = nullptr;
    int status = prosody_client_source_system(Handle(env), &out, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
    Napi::String s = Napi::String::New(env, out);
    prosody_free(out);
    return s;
  }

  Napi::Value AssignedPartitionCount(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t n = 0;
    char* err = nullptr;
    int status = prosody_client_assigned_partition_count(Handle(env), &n, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
    return Napi::Number::New(env, n);
  }

  Napi::Value IsStalled(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    int stalled = 0;
    char* err = nullptr;
    int status = prosody_client_is_stalled(Handle(env), &stalled, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
    return Napi::Boolean::New(env, stalled != 0);
  }

  void StartPolling(Napi::Env env) {
    if (poll_ != nullptr) return;
    int fd = -1;
    char* err = nullptr;
    int status = prosody_client_event_fd(handle_, &fd, &err);
    if (status != PROSODY_OK) throw TakeError(env, status, err);
    poll_ = new uv_poll_t;
    poll_->data = this;
    uv_poll_init(GetDispatch(env)->loop, poll_, fd);
    uv_poll_start(poll_, UV_READABLE, [](uv_poll_t* p, int, int) { static_cast<Client*>(p->data)->Drain(); });
    if (!subscribed_) {
      subscribed_ = true;
      Ref();  // a subscribed client lives while it consumes
    }
  }

  void StopPolling() {
    if (poll_ != nullptr) {
      uv_poll_stop(poll_);
      uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
      poll_ = nullptr;
    }
    if (subscribed_) {
      subscribed_ = false;
      onBatch_.Reset();
      Unref();
    }
  }

  // A batch reaches JS as onBatch(n, nums, strs, text, topics):
  //   nums   Float64Array shared with this object (overwritten by the next
  //          batch), kNumStride numbers per item (the N_* constants of
  //          lib/events.js): kind, event, partition, offset, timestamp or
  //          due time (ms), topic index, index of the key in strs, payload
  //          start and end in text (end -1: the payload is strs[start]),
  //          index of traceparent, tracestate and baggage in strs (-1: all
  //          three are empty);
  //   strs   the batch's keys and trace fields, one string each;
  //   text   when every payload of the batch is ASCII (the common case for
  //          JSON), one Latin-1 string holding them all back to back: a
  //          single copy, sliced in JS. Otherwise null, and each payload
  //          is its own string in strs. Keys are never sliced from a shared
  //          string: applications keep keys (in maps, caches), and a slice
  //          would keep the whole batch alive;
  //   topics the names of the topics seen so far (topic index -> string).
  // Cancellation notices carry only kind and event.
  static constexpr uint32_t kNumStride = 10;
  static constexpr size_t kBatch = 256;

  Napi::Reference<Napi::Float64Array> nums_;
  double* numsData_ = nullptr;
  Napi::Reference<Napi::Array> topics_;
  std::vector<std::string> topicNames_;
  std::string text_;  // reused buffer for the batch's ASCII payloads

  double TopicIndex(Napi::Env env, const char* p, size_t len) {
    for (size_t i = 0; i < topicNames_.size(); i++) {
      const std::string& t = topicNames_[i];
      if (t.size() == len && std::memcmp(t.data(), p, len) == 0) return static_cast<double>(i);
    }
    topicNames_.emplace_back(p, len);
    uint32_t i = static_cast<uint32_t>(topicNames_.size() - 1);
    topics_.Value().Set(i, Napi::String::New(env, p, len));
    return static_cast<double>(i);
  }

  // Cancellation and expiry notices carry only kind and event.
  static bool IsNotice(const prosody_event& e) {
    return e.kind == PROSODY_EVENT_CANCELLED || e.kind == PROSODY_EVENT_EXPIRED;
  }

  static bool Ascii(const void* data, size_t len) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      acc |= w;
    }
    for (; i < len; i++) acc |= p[i];
    return (acc & 0x8080808080808080ull) == 0;
  }

  // V8 strings hold at most 2^29 - 24 characters; a batch's payload text
  // stays well below that, or the batch falls back to one string each.
  static constexpr size_t kMaxText = size_t{1} << 28;

  // Fills nums for evs[0..n), puts the keys and trace fields (and, when
  // *text stays null, the payloads) in strs; returns strs.
  napi_value BatchText(Napi::Env env, const prosody_event* evs, size_t n, napi_value* text) {
    bool ascii = true;
    size_t total = 0;
    for (size_t i = 0; i < n && ascii; i++) {
      const prosody_event& e = evs[i];
      if (IsNotice(e)) continue;
      ascii = Ascii(e.payload, e.payload_len);
      total += e.payload_len;
    }
    if (total > kMaxText) ascii = false;
    if (ascii) {
      text_.clear();
      text_.reserve(total);
    }
    napi_value strs;
    napi_create_array(env, &strs);
    uint32_t si = 0;
    auto put = [&](const char* p, size_t len) {
      napi_value v;
      napi_status st;
      if (len == 0) {
        st = napi_create_string_latin1(env, "", 0, &v);
      } else if (Ascii(p, len)) {
        st = napi_create_string_latin1(env, p, len, &v);
      } else {
        st = napi_create_string_utf8(env, p, len, &v);
      }
      if (st != napi_ok) {
        // Too long for a JS string: the field reads as undefined (a
        // payload then fails to parse, permanently).
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
        napi_get_undefined(env, &v);
      }
      napi_set_element(env, strs, si++, v);
    };
    double* num = numsData_;
    for (size_t i = 0; i < n; i++, num += kNumStride) {
      const prosody_event& e = evs[i];
      FillNumbers(env, e, num);
      if (IsNotice(e)) continue;
      num[6] = si;
      put(e.key, e.key_len);
      if (ascii) {
        num[7] = static_cast<double>(text_.size());
        if (e.payload_len != 0) text_.append(reinterpret_cast<const char*>(e.payload), e.payload_len);
        num[8] = static_cast<double>(text_.size());
      } else {
        num[7] = si;
        num[8] = -1;
        put(reinterpret_cast<const char*>(e.payload), e.payload_len);
      }
      if (e.traceparent_len + e.tracestate_len + e.baggage_len != 0) {
        num[9] = si;
        put(e.traceparent, e.traceparent_len);
        put(e.tracestate, e.tracestate_len);
        put(e.baggage, e.baggage_len);
      } else {
        num[9] = -1;
      }
    }
    if (ascii) {
      if (napi_create_string_latin1(env, text_.data(), text_.size(), text) != napi_ok) {
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
        napi_create_string_latin1(env, "", 0, text);  // the payloads read as "": not JSON
      }
    } else {
      napi_get_null(env, text);
    }
    return strs;
  }

  void FillNumbers(Napi::Env env, const prosody_event& e, double* num) {
    num[0] = e.kind;
    num[1] = static_cast<double>(e.event);
    if (IsNotice(e)) return;
    num[2] = e.partition;
    num[3] = static_cast<double>(e.offset);
    num[4] = static_cast<double>(e.kind == PROSODY_EVENT_TIMER ? e.time_ms : e.timestamp_ms);
    num[5] = TopicIndex(env, e.topic, e.topic_len);
  }

  void Drain() {
    Napi::Env env(env_);
    Napi::HandleScope outer(env);
    Dispatch* d = GetDispatch(env);
    // Outcomes from the previous batch go first: they free the library's
    // slots for the events we are about to take.
    d->FlushCompletions();
    if (nums_.IsEmpty()) {
      Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, kBatch * kNumStride * sizeof(double));
      Napi::Float64Array nums = Napi::Float64Array::New(env, kBatch * kNumStride, ab, 0);
      nums_ = Napi::Reference<Napi::Float64Array>::New(nums, 1);
      numsData_ = static_cast<double*>(ab.Data());
      topics_ = Napi::Persistent(Napi::Array::New(env));
    }
    prosody_event evs[kBatch];
    for (;;) {
      if (handle_ == 0 || onBatch_.IsEmpty()) return;
      size_t n = 0;
      char* err = nullptr;
      int status = prosody_client_poll(handle_, evs, kBatch, sizeof(prosody_event), &n, &err);
      prosody_free(err);
      if (status != PROSODY_OK || n == 0) return;
      Napi::HandleScope scope(env);
      // Copied now: the bytes are borrowed until the event completes.
      napi_value text;
      napi_value strs = BatchText(env, evs, n, &text);
      try {
        onBatch_.MakeCallback(Value(), {Napi::Number::New(env, static_cast<double>(n)), nums_.Value(),
                                        Napi::Value(env, strs), Napi::Value(env, text), topics_.Value()});
      } catch (const Napi::Error& err) {
        napi_fatal_exception(env, err.Value());
      }
      // The handlers' microtasks ran when the callback returned: what they
      // completed goes out now rather than from the idle handle.
      d->FlushCompletions();
      if (n < kBatch) return;
    }
  }
};

// ---------------------------------------------------------------------------
// Events: outcomes, cancellation, timers (module functions taking the
// event handle as a Number; handles stay far below 2^53).

// complete(event, outcome, message?)
Napi::Value Complete(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  int32_t outcome = info[1].As<Napi::Number>().Int32Value();
  std::string msg;
  bool hasMsg = info.Length() > 2 && info[2].IsString();
  if (hasMsg) msg = info[2].As<Napi::String>().Utf8Value();
  GetDispatch(info.Env())->QueueCompletion(id, outcome, hasMsg ? msg.c_str() : nullptr);
  return info.Env().Undefined();
}

// armCompletions(): JS wrote the first successful outcome into the shared
// buffer (completionIds / completionCount); flush it this loop turn.
Napi::Value ArmCompletions(const Napi::CallbackInfo& info) {
  GetDispatch(info.Env())->Arm();
  return info.Env().Undefined();
}

Napi::Value ShouldCancel(const Napi::CallbackInfo& info) {
  int cancelled = 0;
  char* err = nullptr;
  int status = prosody_event_should_cancel(HandleArg(info, 0), &cancelled, &err);
  prosody_free(err);
  // A completed event's context is no longer valid: it counts as cancelled.
  return Napi::Boolean::New(info.Env(), status != PROSODY_OK || cancelled != 0);
}

Napi::Value Schedule(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  int64_t t = info[1].As<Napi::Number>().Int64Value();
  return StartOp(info.Env(), [&](Op* op, char** err) { return prosody_event_schedule(id, t, OnDone, op, err); });
}

Napi::Value ClearAndSchedule(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  int64_t t = info[1].As<Napi::Number>().Int64Value();
  return StartOp(info.Env(),
                 [&](Op* op, char** err) { return prosody_event_clear_and_schedule(id, t, OnDone, op, err); });
}

Napi::Value Unschedule(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  int64_t t = info[1].As<Napi::Number>().Int64Value();
  return StartOp(info.Env(), [&](Op* op, char** err) { return prosody_event_unschedule(id, t, OnDone, op, err); });
}

Napi::Value ClearScheduled(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  return StartOp(info.Env(), [&](Op* op, char** err) { return prosody_event_clear_scheduled(id, OnDone, op, err); });
}

Napi::Value Scheduled(const Napi::CallbackInfo& info) {
  uint64_t id = HandleArg(info, 0);
  return StartOp(
      info.Env(), [&](Op* op, char** err) { return prosody_event_scheduled(id, OnTimes, op, err); }, true);
}

// ---------------------------------------------------------------------------
// Admin client

class Admin : public Napi::ObjectWrap<Admin> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "NativeAdmin",
                       {
                           InstanceMethod("createTopic", &Admin::CreateTopic),
                           InstanceMethod("deleteTopic", &Admin::DeleteTopic),
                           InstanceMethod("release", &Admin::Release),
                       });
  }

  explicit Admin(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Admin>(info) {
    std::string config = StringArg(info, 0, "config");
    char* err = nullptr;
    int status = prosody_admin_new(config.c_str(), &handle_, &err);
    if (status != PROSODY_OK) throw TakeError(info.Env(), status, err);
  }

  ~Admin() override {
    if (handle_ != 0) prosody_admin_release(handle_, nullptr);
  }

 private:
  uint64_t handle_ = 0;

  // createTopic(topicJson)
  Napi::Value CreateTopic(const Napi::CallbackInfo& info) {
    std::string spec = StringArg(info, 0, "topic");
    uint64_t h = handle_;
    return StartOp(info.Env(),
                   [&](Op* op, char** err) { return prosody_admin_create_topic(h, spec.c_str(), OnDone, op, err); });
  }

  Napi::Value DeleteTopic(const Napi::CallbackInfo& info) {
    std::string name = StringArg(info, 0, "name");
    uint64_t h = handle_;
    return StartOp(info.Env(), [&](Op* op, char** err) {
      return prosody_admin_delete_topic(h, name.data(), name.size(), OnDone, op, err);
    });
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    if (handle_ != 0) {
      prosody_admin_release(handle_, nullptr);
      handle_ = 0;
    }
    return info.Env().Undefined();
  }
};

// ---------------------------------------------------------------------------
// Logging and module setup

// setLogSink(fn | null): fn(level, timeMs, target, message, attributes)
// receives every log record of the library; null restores stderr.
Napi::Value SetLogSink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Dispatch* d = GetDispatch(env);
  char* err = nullptr;
  int status;
  if (info[0].IsFunction()) {
    d->logSink = Napi::Persistent(info[0].As<Napi::Function>());
    logDispatch = d;
    status = prosody_set_log_callback(OnLog, d, &err);
  } else {
    d->logSink.Reset();
    logDispatch = nullptr;
    status = prosody_set_log_callback(nullptr, nullptr, &err);
  }
  if (status != PROSODY_OK) throw TakeError(env, status, err);
  return env.Undefined();
}

// configSchema(): the core's option schema, as JSON text.
Napi::Value ConfigSchema(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  char* out = nullptr;
  char* err = nullptr;
  int status = prosody_config_schema(&out, &err);
  if (status != PROSODY_OK) throw TakeError(env, status, err);
  Napi::String s = Napi::String::New(env, out);
  prosody_free(out);
  return s;
}

// flushTelemetry(timeoutMs): resolves once every client's queued telemetry
// events are written (prosody_flush_telemetry).
Napi::Value FlushTelemetry(const Napi::CallbackInfo& info) {
  int64_t timeout = info[0].As<Napi::Number>().Int64Value();
  return StartOp(info.Env(), [&](Op* op, char** err) { return prosody_flush_telemetry(timeout, OnDone, op, err); });
}

Napi::Value Version(const Napi::CallbackInfo& info) {
  const char* v = nullptr;
  int status = prosody_version(&v);
  if (status != PROSODY_OK) throw StatusError(info.Env(), status, nullptr);
  return Napi::String::New(info.Env(), v);
}

// Environment teardown: stop taking callbacks, close the loop handles. The
// Dispatch itself is never freed: library threads may still hold pointers to
// it (through pending operations).
void CloseDispatch(Napi::Env, Dispatch* d) {
  {
    std::lock_guard<std::mutex> lock(d->mu);
    d->closed = true;
  }
  if (logDispatch == d) {
    prosody_set_log_callback(nullptr, nullptr, nullptr);
    logDispatch = nullptr;
  }
  d->FlushCompletions();
  uv_close(reinterpret_cast<uv_handle_t*>(&d->async), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&d->idle), nullptr);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* d = new Dispatch();
  d->env = env;
  napi_get_uv_event_loop(env, &d->loop);
  uv_async_init(d->loop, &d->async, [](uv_async_t* h) { static_cast<Dispatch*>(h->data)->Drain(); });
  d->async.data = d;
  uv_unref(reinterpret_cast<uv_handle_t*>(&d->async));
  uv_idle_init(d->loop, &d->idle);
  d->idle.data = d;
  napi_async_init(env, Napi::Object::New(env), Napi::String::New(env, "prosody"), &d->asyncContext);
  env.SetInstanceData<Dispatch, CloseDispatch>(d);

  exports.Set("Client", Client::Init(env));
  exports.Set("Admin", Admin::Init(env));
  exports.Set("complete", Napi::Function::New(env, Complete));
  {
    // Owned by the Dispatch (never freed), so that the teardown flush can
    // still read them whatever V8 has collected by then.
    d->okIds = new double[Dispatch::kOkCapacity]();
    d->okCount = new int32_t[1]();
    Napi::ArrayBuffer ids = Napi::ArrayBuffer::New(env, d->okIds, Dispatch::kOkCapacity * sizeof(double));
    Napi::ArrayBuffer count = Napi::ArrayBuffer::New(env, d->okCount, sizeof(int32_t));
    exports.Set("completionIds", Napi::Float64Array::New(env, Dispatch::kOkCapacity, ids, 0));
    exports.Set("completionCount", Napi::Int32Array::New(env, 1, count, 0));
  }
  exports.Set("armCompletions", Napi::Function::New(env, ArmCompletions));
  exports.Set("shouldCancel", Napi::Function::New(env, ShouldCancel));
  exports.Set("schedule", Napi::Function::New(env, Schedule));
  exports.Set("clearAndSchedule", Napi::Function::New(env, ClearAndSchedule));
  exports.Set("unschedule", Napi::Function::New(env, Unschedule));
  exports.Set("clearScheduled", Napi::Function::New(env, ClearScheduled));
  exports.Set("scheduled", Napi::Function::New(env, Scheduled));
  d->stateCtor = Napi::Persistent(NativeState::Init(env));
  d->cursorCtor = Napi::Persistent(NativeCursor::Init(env));
  d->readerCtor = Napi::Persistent(NativeReader::Init(env));
  exports.Set("openState", Napi::Function::New(env, OpenState));
  exports.Set("setLogSink", Napi::Function::New(env, SetLogSink));
  exports.Set("version", Napi::Function::New(env, Version));
  exports.Set("flushTelemetry", Napi::Function::New(env, FlushTelemetry));
  exports.Set("configSchema", Napi::Function::New(env, ConfigSchema));
  return exports;
}

}  // namespace

NODE_API_MODULE(prosody, Init)
