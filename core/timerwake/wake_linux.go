package timerwake

import (
	"runtime"
	"syscall"
	"time"
)

// needed: the runtime waits for timers in epoll, in whole milliseconds.
const needed = true

// wake sleeps period in the kernel, which keeps time to the microsecond,
// then yields, on which the runtime runs the timers that are due. An
// interrupted sleep (EINTR) is a wake-up as good as any.
func wake(period time.Duration) {
	ts := syscall.NsecToTimespec(int64(period))
	_ = syscall.Nanosleep(&ts, nil)
	runtime.Gosched()
}
