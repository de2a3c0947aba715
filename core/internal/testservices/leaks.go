package testservices

import "go.uber.org/goleak"

// LeakOptions are the goleak options every package's TestMain uses. They
// name only goroutines that are process-wide by design; anything else still
// running after a test is a real leak.
//
//   - sarama records metrics through rcrowley/go-metrics, which starts one
//     ticker goroutine the first time any meter is created and never stops it.
//     It is not per client, so it cannot grow.
//   - Mock mode shares one in-process kfake cluster that lives until the
//     process exits (core/mockbroker.Shared): its run loop and accept loop.
//     Per-connection goroutines are not ignored, so a client left open is
//     still reported.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreTopFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*broker).listen"),
	}
}
