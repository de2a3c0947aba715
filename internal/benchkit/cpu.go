package benchkit

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used so far (user and system),
// and the system part of it; zero if the kernel does not say.
func CPUTime() (total, system time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano())
}
