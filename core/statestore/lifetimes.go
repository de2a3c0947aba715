package statestore

import (
	"context"
	"time"
)

// lifetimes are reads that also say until when their answer holds (zero:
// until a write changes it), on the store's own clock. The cache keeps an
// answer no longer than that: a row with a TTL must read as absent once it
// expired, cached or not. Both stores of the package implement it.
type lifetimes interface {
	now() time.Time
	valueUntil(ctx context.Context, k Key, collection string) ([]byte, bool, time.Time, error)
	mapGetUntil(ctx context.Context, k Key, collection string, keys []string) ([][]byte, []time.Time, error)
	boundsUntil(ctx context.Context, k Key, collection string) (Bounds, time.Time, error)
}

// expiredAlready is a lifetime that has ended: an answer that carries it
// is passed on but not cached.
var expiredAlready = time.Unix(1, 0)

// unknownLifetimes adapts a Store from elsewhere: nothing it reads is
// known to outlive the read, so only write-through answers get cached.
type unknownLifetimes struct{ Store }

func (u unknownLifetimes) now() time.Time { return time.Now() }

func (u unknownLifetimes) valueUntil(ctx context.Context, k Key, collection string) ([]byte, bool, time.Time, error) {
	v, ok, err := u.Value(ctx, k, collection)
	return v, ok, expiredAlready, err
}

func (u unknownLifetimes) mapGetUntil(ctx context.Context, k Key, collection string, keys []string) ([][]byte, []time.Time, error) {
	vs, err := u.MapGet(ctx, k, collection, keys)
	exps := make([]time.Time, len(keys))
	for i := range exps {
		exps[i] = expiredAlready
	}
	return vs, exps, err
}

func (u unknownLifetimes) boundsUntil(ctx context.Context, k Key, collection string) (Bounds, time.Time, error) {
	b, err := u.DequeBounds(ctx, k, collection)
	return b, expiredAlready, err
}
