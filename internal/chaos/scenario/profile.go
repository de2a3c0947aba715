package scenario

import (
	"time"
)

// Profile is a named list of scenarios built from one seed.
type Profile struct {
	Name  string
	Specs []Spec
}

// splitmix derives each scenario's seed from the run's, so any one
// scenario can be replayed alone with its own seed.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Short runs every kind once, briefly: about five minutes with its own
// services' start-up.
func Short(seed uint64) Profile {
	d := map[string]time.Duration{
		SIGKILL: 20 * time.Second, SIGTERM: 20 * time.Second, Storm: 16 * time.Second, Broker: 12 * time.Second,
		Cassandra: 12 * time.Second, Network: 40 * time.Second, Handler: 10 * time.Second,
	}
	p := Profile{Name: "short"}
	for i, k := range Kinds {
		p.Specs = append(p.Specs, Spec{Kind: k, Seed: splitmix(seed + uint64(i)), Duration: d[k], Rate: 40})
	}
	return p
}

// Long cycles through every kind, two and a half minutes of faults each, until
// total is used.
func Long(seed uint64, total time.Duration) Profile {
	p := Profile{Name: "long"}
	per := 150 * time.Second
	// With its start, drain and stop each scenario takes about 20 s more.
	n := int((total + per + 20*time.Second - 1) / (per + 20*time.Second))
	for i := 0; i < max(n, len(Kinds)); i++ {
		k := Kinds[i%len(Kinds)]
		p.Specs = append(p.Specs, Spec{Kind: k, Seed: splitmix(seed + uint64(i)), Duration: per, Rate: 60})
	}
	return p
}

// One is a single scenario, to replay a failure with its seed.
func One(kind string, seed uint64, d time.Duration) Profile {
	return Profile{Name: kind, Specs: []Spec{{Kind: kind, Seed: seed, Duration: d, Rate: 40}}}
}
