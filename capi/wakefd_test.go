//go:build capitest

package main

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/prosody-events/prosody-go/core/event"
)

// The host's descriptor is readable exactly while events wait: after the
// first of many pushes, after a poll that leaves some behind, and not
// after the poll that empties the queue, however many signals came before
// (a pipe holds one byte per signal; an eventfd sums them). `make test`
// runs this with the eventfd and, with the tag prosody_pipefd, the pipe.
func TestWakeFDIsReadableWhileEventsWait(t *testing.T) {
	d := testDispatcher(t)
	fd := d.wfd.readFD()
	if readable(t, fd) {
		t.Fatal("readable before anything was queued")
	}
	for range 300 {
		d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
		// Signals of the host's earlier wake-ups, as a race with poll
		// leaves them.
		d.wfd.signal()
	}
	if !readable(t, fd) {
		t.Fatal("not readable with 300 items queued")
	}
	if n := len(testPoll(d)); n != 64 {
		t.Fatalf("polled %d, want 64", n)
	}
	if !readable(t, fd) {
		t.Fatal("not readable with 236 items still queued")
	}
	for len(testPoll(d)) > 0 {
	}
	if readable(t, fd) {
		t.Fatal("readable after the queue was emptied")
	}
	d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	if !readable(t, fd) {
		t.Fatal("not readable after a push into the empty queue")
	}
}

// readable polls fd, waiting a millisecond at most.
func readable(t *testing.T, fd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n > 0 && fds[0].Revents&unix.POLLIN != 0
	}
}
