//go:build !linux || prosody_pipefd

package main

import "syscall"

// wakeFD is what the host waits on to learn that events are ready: where
// there is no eventfd (macOS, the BSDs), a non-blocking pipe, readable
// while it holds a byte. A signal writes one byte (a full pipe is
// readable already, so a write that would block is not needed); a reset
// reads until the pipe is empty. Linux builds it with the tag
// prosody_pipefd, so that its tests run here too.
type wakeFD struct{ r, w int }

func openWakeFD() (wakeFD, error) {
	var p [2]int
	// Holding ForkLock keeps the ends from leaking into a child that
	// os/exec forks before they are close-on-exec.
	syscall.ForkLock.RLock()
	err := syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return wakeFD{}, err
	}
	for _, fd := range p {
		if err := syscall.SetNonblock(fd, true); err != nil {
			_ = syscall.Close(p[0])
			_ = syscall.Close(p[1])
			return wakeFD{}, err
		}
	}
	return wakeFD{r: p[0], w: p[1]}, nil
}

// readFD is the descriptor the host watches.
func (w wakeFD) readFD() int { return w.r }

func (w wakeFD) signal() { _, _ = syscall.Write(w.w, []byte{1}) }

func (w wakeFD) reset() {
	var buf [64]byte
	for {
		if n, _ := syscall.Read(w.r, buf[:]); n < len(buf) {
			return
		}
	}
}

func (w wakeFD) close() {
	_ = syscall.Close(w.r)
	_ = syscall.Close(w.w)
}
