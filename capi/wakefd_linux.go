//go:build !prosody_pipefd

package main

/*
#include "shims.h"
*/
import "C"

import "syscall"

// wakeFD is what the host waits on to learn that events are ready: on
// Linux one eventfd, which a write makes readable and one read resets.
type wakeFD struct{ fd int }

func openWakeFD() (wakeFD, error) {
	fd, err := C.prosodyInt_eventfd()
	if fd < 0 {
		return wakeFD{}, err
	}
	return wakeFD{int(fd)}, nil
}

// readFD is the descriptor the host watches.
func (w wakeFD) readFD() int { return w.fd }

var one = [8]byte{1} // eventfd increments are native-endian uint64

func (w wakeFD) signal() { _, _ = syscall.Write(w.fd, one[:]) }

func (w wakeFD) reset() {
	var buf [8]byte
	_, _ = syscall.Read(w.fd, buf[:])
}

func (w wakeFD) close() { _ = syscall.Close(w.fd) }
