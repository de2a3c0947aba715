package deferstore

import "github.com/prosody-events/prosody-go/core/timerstore"

var (
	spanA = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	spanB = map[string]string{"traceparent": "00-abc-def-01", "tracestate": "x=1", "baggage": "k=v"}
)

var timerCases = []conformanceCase{
	{"timers complete in time order with their spans", func(h *harness) {
		c := h.timers(0)
		c.wantNext("k", nil, 0)
		c.first("k", dt(100, spanA))
		c.append("k", dt(300, nil), dt(200, spanB))
		c.wantTimes("k", 100, 200, 300)
		c.wantNext("k", ptr(dt(100, spanA)), 0)
		c.complete("k", 100, ptr(dt(200, spanB)))
		c.wantNext("k", ptr(dt(200, spanB)), 0)
		c.complete("k", 200, ptr(dt(300, nil))) // nil span stays nil
		c.complete("k", 300, nil)
		c.wantNext("k", nil, 0)
		c.wantTimes("k")
	}},
	{"append keeps the retry count and complete resets it", func(h *harness) {
		c := h.timers(0)
		c.first("k", dt(10, nil))
		c.retries("k", 3)
		c.append("k", dt(20, spanA))
		c.wantNext("k", ptr(dt(10, nil)), 3)
		c.complete("k", 10, ptr(dt(20, spanA)))
		c.wantNext("k", ptr(dt(20, spanA)), 0)
		c.retries("none", 5)
		c.wantNext("none", nil, 0)
	}},
	{"append ahead of the head or at its time moves the head", func(h *harness) {
		c := h.timers(0)
		c.append("k", dt(50, nil))
		c.wantNext("k", ptr(dt(50, nil)), 0)
		c.retries("k", 1)
		c.append("k", dt(40, spanA))
		c.wantNext("k", ptr(dt(40, spanA)), 1)
		c.append("k", dt(40, spanB)) // same time: the span is replaced
		c.wantNext("k", ptr(dt(40, spanB)), 1)
		c.wantTimes("k", 40, 50)
	}},
	{"defer first replaces whatever the key held", func(h *harness) {
		c := h.timers(0)
		c.first("k", dt(10, nil))
		c.append("k", dt(5, nil), dt(20, nil))
		c.retries("k", 2)
		c.first("k", dt(15, spanA))
		c.wantNext("k", ptr(dt(15, spanA)), 0)
		c.wantTimes("k", 15)
	}},
	{"remove deletes one entry and keeps the retry count", func(h *harness) {
		c := h.timers(0)
		c.first("k", dt(10, nil))
		c.append("k", dt(20, spanA), dt(30, nil), dt(40, nil))
		c.retries("k", 4)
		c.remove("k", 30) // behind the head
		c.wantTimes("k", 10, 20, 40)
		c.wantNext("k", ptr(dt(10, nil)), 4)
		c.remove("k", 10) // the head
		c.wantNext("k", ptr(dt(20, spanA)), 4)
		c.remove("k", 25) // not queued
		c.wantTimes("k", 20, 40)
		c.remove("k", 20)
		c.remove("k", 40) // the last one deletes the key
		c.wantNext("k", nil, 0)
		c.wantTimes("k")
		c.remove("k", 40)
		c.first("k", dt(1, nil)) // and its retry count went with it
		c.wantNext("k", ptr(dt(1, nil)), 0)
	}},
	{"delete removes the key", func(h *harness) {
		c := h.timers(0)
		c.first("k", dt(10, spanA))
		c.append("k", dt(20, nil))
		c.first("other", dt(5, nil))
		if err := c.seg.Delete(h.ctx, "k"); err != nil {
			h.t.Fatal(err)
		}
		c.wantNext("k", nil, 0)
		c.wantTimes("k")
		c.wantNext("other", ptr(dt(5, nil)), 0)
	}},
	{"spans are copied", func(h *harness) {
		c := h.timers(0)
		span := map[string]string{"traceparent": "a"}
		c.first("k", dt(10, span))
		span["traceparent"] = "mutated"
		got, _, _, err := c.seg.Next(h.ctx, "k")
		h.check(err, "Next")
		got.Span["traceparent"] = "mutated too"
		c.wantNext("k", ptr(dt(10, map[string]string{"traceparent": "a"})), 0)
		c.first("e", dt(10, map[string]string{})) // empty reads back as nil
		c.wantNext("e", ptr(dt(10, nil)), 0)
	}},
	{"keys, partitions and groups are isolated", func(h *harness) {
		p0 := h.timers(0)
		p1 := h.timers(1)
		other := h.timersOf(h.store, h.group+"x", 0)
		p0.first("k", dt(1, nil))
		p1.first("k", dt(2, nil))
		p1.retries("k", 6)
		p0.wantNext("k", ptr(dt(1, nil)), 0)
		p1.wantNext("k", ptr(dt(2, nil)), 6)
		other.wantNext("k", nil, 0)
		h.messages(0).wantNext("k", -1, 0)
		p0.complete("k", 1, nil)
		p1.wantTimes("k", 2)
	}},
	{"a reopened segment reads the stored state", func(h *harness) {
		c := h.timers(3)
		c.wantNext("k", nil, 0)
		other := h.timersOf(h.open(h.t), h.group, 3)
		other.first("k", dt(70, spanB))
		other.append("k", dt(80, nil))
		other.retries("k", 2)
		again := h.timers(3)
		again.wantNext("k", ptr(dt(70, spanB)), 2)
		again.wantTimes("k", 70, 80)
		again.complete("k", 70, ptr(dt(80, nil)))
		h.timersOf(h.open(h.t), h.group, 3).wantNext("k", ptr(dt(80, nil)), 0)
	}},
	{"times beyond 2^31 seconds round trip", func(h *harness) {
		c := h.timers(0)
		late := timerstore.Time(1<<32 - 10)
		c.first("k", dt(late, nil))
		c.wantNext("k", ptr(dt(late, nil)), 0)
		c.wantTimes("k", late)
	}},
}
