// Package permit lets the engine lend an invocation the concurrency permit
// its goroutine holds (see middleware.Limiter.Lease), recorded in the
// invocation's event.Context. It is internal so that handlers, which get
// that Context, cannot lend or drop a permit: a dropped permit nobody
// released would be lost to the limiter for good.
//
// Package event registers the accessors at init; the Context travels as an
// any because this package cannot import event (event imports it).
package permit

var (
	get func(ctx any) uint32
	set func(ctx any, limiter uint32)
)

// Register installs the accessors of event.Context's permit field. Package
// event calls it once, at init.
func Register(getter func(ctx any) uint32, setter func(ctx any, limiter uint32)) {
	get, set = getter, setter
}

// Lend records in ctx, an *event.Context about to be invoked, that the
// invoking goroutine holds a permit of the limiter with this id for it.
// Only that goroutine may call it, before the handler runs.
func Lend(ctx any, limiter uint32) { set(ctx, limiter) }

// Lent is the id of the limiter whose permit ctx was lent and still has,
// 0 if none.
func Lent(ctx any) uint32 { return get(ctx) }

// Drop records that the limiter took the lent permit back, so that later
// attempts take their own.
func Drop(ctx any) { set(ctx, 0) }
