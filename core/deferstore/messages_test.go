package deferstore

var messageCases = []conformanceCase{
	{"offsets complete in FIFO order", func(h *harness) {
		m := h.messages(0)
		m.wantNext("k", -1, 0)
		m.first("k", 10)
		m.append("k", 20, 30)
		m.wantNext("k", 10, 0)
		m.complete("k", 10, 20)
		m.wantNext("k", 20, 0)
		m.complete("k", 20, 30)
		m.complete("k", 30, -1) // the last one deletes the key
		m.wantNext("k", -1, 0)
		m.complete("k", 30, -1) // completing an empty key is harmless
	}},
	{"append keeps the retry count and complete resets it", func(h *harness) {
		m := h.messages(0)
		m.first("k", 5)
		m.retries("k", 3)
		m.wantNext("k", 5, 3)
		m.append("k", 6)
		m.wantNext("k", 5, 3)
		m.retries("k", 4)
		m.complete("k", 5, 6)
		m.wantNext("k", 6, 0)
	}},
	{"retry count of an empty key is not stored", func(h *harness) {
		m := h.messages(0)
		m.retries("k", 7)
		m.wantNext("k", -1, 0)
		m.first("k", 1)
		m.wantNext("k", 1, 0)
	}},
	{"defer first replaces whatever the key held", func(h *harness) {
		m := h.messages(0)
		m.first("k", 1)
		m.append("k", 2, 30)
		m.retries("k", 2)
		m.first("k", 9)
		m.wantNext("k", 9, 0)
		m.complete("k", 9, -1)
		m.wantNext("k", -1, 0)
	}},
	{"append to an empty key or ahead of the head moves the head", func(h *harness) {
		m := h.messages(0)
		m.append("k", 40)
		m.wantNext("k", 40, 0)
		m.append("k", 35)
		m.wantNext("k", 35, 0)
		m.complete("k", 35, 40)
		m.complete("k", 40, -1)
	}},
	{"completing an offset behind the head keeps the head", func(h *harness) {
		m := h.messages(0)
		m.first("k", 1)
		m.append("k", 2, 3)
		m.retries("k", 4)
		m.complete("k", 2, 1)
		m.wantNext("k", 1, 0)
		m.complete("k", 1, 3)
		m.complete("k", 3, -1)
	}},
	{"delete removes the key", func(h *harness) {
		m := h.messages(0)
		m.first("k", 1)
		m.append("k", 2)
		m.retries("k", 5)
		m.first("other", 3)
		if err := m.seg.Delete(h.ctx, "k"); err != nil {
			h.t.Fatal(err)
		}
		m.wantNext("k", -1, 0)
		m.wantNext("other", 3, 0)
		if err := m.seg.Delete(h.ctx, "never"); err != nil {
			h.t.Fatal(err)
		}
		m.first("k", 8) // a deleted key can be deferred again
		m.wantNext("k", 8, 0)
	}},
	{"keys, partitions and groups are isolated", func(h *harness) {
		p0 := h.messages(0)
		p1 := h.messages(1)
		other := h.messagesOf(h.store, h.group+"x", 0)
		p0.first("k", 1)
		p0.first("j", 2)
		p1.first("k", 100)
		p1.retries("k", 9)
		p0.wantNext("k", 1, 0)
		p0.wantNext("j", 2, 0)
		p1.wantNext("k", 100, 9)
		other.wantNext("k", -1, 0)
		p0.complete("k", 1, -1)
		p1.wantNext("k", 100, 9)
		p0.wantNext("j", 2, 0)
		// Timer segments of the same partition are separate too.
		h.timers(0).wantNext("j", nil, 0)
	}},
	{"a reopened segment reads the stored state", func(h *harness) {
		m := h.messages(3)
		m.wantNext("k", -1, 0) // may cache "known empty"
		m.first("j", 7)
		m.append("j", 8)
		m.retries("j", 2)
		// Another store (another process for Cassandra) defers k meanwhile.
		other := h.messagesOf(h.open(h.t), h.group, 3)
		other.wantNext("j", 7, 2)
		other.first("k", 50)
		other.append("k", 51)
		// A segment opened again (the partition assigned again) sees it.
		again := h.messages(3)
		again.wantNext("k", 50, 0)
		again.wantNext("j", 7, 2)
		again.complete("k", 50, 51)
		// (other's cache is stale now: a segment is only ever used by the
		// partition's one owner, so only fresh opens are checked.)
		h.messagesOf(h.open(h.t), h.group, 3).wantNext("k", 51, 0)
	}},
}
