// Command capi is the C ABI of Prosody, built with -buildmode=c-shared into
// libprosody.so (make lib). include/prosody.h is the contract.
//
// The layout follows DESIGN.md §4:
//
//   - shims.c defines every public prosody_* function in C. Each checks for
//     a fork before entering the Go runtime, then calls the Go export of the
//     same name with the prefix prosodyGo_ (exports.map hides those).
//   - Objects cross as integer handles (handles.go); C never holds a Go
//     pointer.
//   - Calls that do I/O return at once and report through the host's
//     completion callback, called through a C trampoline (callback.go).
//   - Events reach the host in batches: a per-client ready queue, a wake-up
//     fd (wakefd_*.go) and a notify callback once per wake-up, and a poll call that moves
//     many events at once (dispatch.go).
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -Wall
#include "shims.h"
*/
import "C"

import (
	gometrics "github.com/rcrowley/go-metrics"

	prosody "github.com/prosody-events/prosody-go"
)

// Version is the library version (the VERSION file); include/prosody.h's
// PROSODY_VERSION must match it (the C tests check, and so does
// scripts/dist version --check).
var Version = prosody.Version

func main() {}

func init() {
	initProcs()
	// sarama records request sizes, latencies and rates in go-metrics
	// histograms and meters that nothing in the library reads: a lock and
	// an update per request, a goroutine ticking every five seconds, and
	// about a megabyte of samples per client. Nothing else in this library
	// uses go-metrics, so it is turned off here; Go programs that import
	// the core keep sarama's default.
	gometrics.UseNilMetrics = true
}
