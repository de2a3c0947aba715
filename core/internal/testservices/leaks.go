package testservices

import "go.uber.org/goleak"

// LeakOptions are the goleak options every package's TestMain should use.
//
// sarama records metrics through rcrowley/go-metrics, which starts a single
// process-wide ticker goroutine the first time a meter is created and never
// stops it. It is not per client, so it cannot grow; anything else still
// running after a test is a real leak.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	}
}
