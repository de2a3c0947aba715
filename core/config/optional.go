package config

// Optional holds a value that may be absent. The zero Optional is absent.
//
// It is used where "not set" carries its own meaning, for example a disabled
// probe server or a handler timeout that falls back to a share of the stall
// threshold, so that those cases cannot be confused with a zero value.
type Optional[T any] struct {
	value T
	set   bool
}

// Some returns an Optional holding v.
func Some[T any](v T) Optional[T] { return Optional[T]{value: v, set: true} }

// None returns an absent Optional.
func None[T any]() Optional[T] { return Optional[T]{} }

// Get returns the value and whether it is present.
func (o Optional[T]) Get() (T, bool) { return o.value, o.set }

// IsSet reports whether a value is present.
func (o Optional[T]) IsSet() bool { return o.set }

// Or returns the value if present, otherwise fallback.
func (o Optional[T]) Or(fallback T) T {
	if o.set {
		return o.value
	}
	return fallback
}
