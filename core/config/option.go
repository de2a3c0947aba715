package config

import (
	"fmt"
	"math"
	"time"
)

// option describes one setting of a configuration struct C: its names, its
// default, how to read it from each source and how to check it. Tables of
// options (see registry.go and topic.go) drive loading, defaults and
// per-option validation, so each source is handled by one piece of code.
type option[C any] struct {
	name    string // snake_case name: the JSON key and the prefix of error messages
	env     string // environment variable, or "" when there is none
	envOnly bool   // true when the option has no JSON key (PROSODY_LOG)

	reset    func(c *C)                       // store the default
	fromText func(s string) (func(*C), error) // parse environment text
	fromJSON func(v any) (func(*C), error)    // parse a JSON value; a nil setter means "unset"
	value    func(c *C) any                   // current value, to notice explicit changes
	check    func(c *C) (message string)      // "" when the value obeys every rule
}

// rule returns a description of what is allowed when v breaks it, else "".
type rule[T any] func(v T) string

// opt builds an option bound to one field of C.
func opt[C, T any](name, env string, field func(*C) *T, k kind[T], def T, rules ...rule[T]) option[C] {
	return option[C]{
		name:  name,
		env:   env,
		reset: func(c *C) { *field(c) = def },
		fromText: func(s string) (func(*C), error) {
			v, err := k.text(s)
			if err != nil {
				return nil, err
			}
			return func(c *C) { *field(c) = v }, nil
		},
		fromJSON: func(raw any) (func(*C), error) {
			if raw == nil && !k.nullIsValue {
				return nil, nil
			}
			v, err := k.json(raw)
			if err != nil {
				return nil, err
			}
			return func(c *C) { *field(c) = v }, nil
		},
		value: func(c *C) any { return *field(c) },
		check: func(c *C) string {
			v := *field(c)
			for _, r := range rules {
				if msg := r(v); msg != "" {
					return msg + ", got " + k.format(v)
				}
			}
			return ""
		},
	}
}

// jsonOnly marks an option that has no environment variable.
func jsonOnly[C any](o option[C]) option[C] {
	o.env = ""
	o.fromText = nil
	return o
}

// envOnly marks an option that has no JSON key.
func envOnly[C any](o option[C]) option[C] {
	o.envOnly = true
	return o
}

// ---- rules ----

func atLeast(min int) rule[int] {
	return func(v int) string {
		if v < min {
			return fmt.Sprintf("must be at least %d", min)
		}
		return ""
	}
}

// within takes int64 bounds so that limits such as 2^32-1 compile on 32-bit
// platforms too.
func within(lo, hi int64) rule[int] {
	return func(v int) string {
		if int64(v) < lo || int64(v) > hi {
			return fmt.Sprintf("must be within [%d, %d]", lo, hi)
		}
		return ""
	}
}

// fraction also rejects NaN, which fails every comparison.
func fraction(v float64) string {
	if !(v >= 0 && v <= 1) {
		return "must be within [0, 1]"
	}
	return ""
}

func nonNegativeFinite(v float64) string {
	if !(v >= 0) || math.IsInf(v, 1) {
		return "must be a finite number of at least 0"
	}
	return ""
}

func positive(d time.Duration) string {
	if d <= 0 {
		return "must be greater than 0"
	}
	return ""
}

func atLeastDuration(min time.Duration) rule[time.Duration] {
	return func(d time.Duration) string {
		if d < min {
			return "must be at least " + FormatDuration(min)
		}
		return ""
	}
}

func notEmpty(s string) string {
	if s == "" {
		return "must not be empty"
	}
	return ""
}

func noEmptyEntries(items []string) string {
	for _, item := range items {
		if item == "" {
			return "must not contain empty entries"
		}
	}
	return ""
}

// whenSet applies r to the value of an Optional, if there is one.
func whenSet[T any](r rule[T]) rule[Optional[T]] {
	return func(o Optional[T]) string {
		if v, ok := o.Get(); ok {
			return r(v)
		}
		return ""
	}
}
