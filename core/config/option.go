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
	typ      string                           // the value's type in the schema (kind.schemaType)
	null     bool                             // JSON null is a value (kind.nullIsValue)
	secret   bool                             // a password: never shown (secretOpt)
	facts    map[string]any                   // what the rules allow, for the schema
}

// rule is one thing an option's value must obey. check returns a
// description of what is allowed when v breaks it, else "". facts says the
// same for the option schema (schema.go): bounds ("min", "max",
// "exclusive_min"), allowed "values", or a "rule" in words. Durations are
// stated in seconds.
type rule[T any] struct {
	check func(v T) string
	facts map[string]any
}

// ruleOf makes a rule of a check and its facts.
func ruleOf[T any](check func(v T) string, facts map[string]any) rule[T] {
	return rule[T]{check: check, facts: facts}
}

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
		typ:   k.schemaType,
		null:  k.nullIsValue,
		facts: mergeFacts(rules),
		check: func(c *C) string {
			v := *field(c)
			for _, r := range rules {
				if msg := r.check(v); msg != "" {
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
	return ruleOf(func(v int) string {
		if v < min {
			return fmt.Sprintf("must be at least %d", min)
		}
		return ""
	}, map[string]any{"min": min})
}

// within takes int64 bounds so that limits such as 2^32-1 compile on 32-bit
// platforms too.
func within(lo, hi int64) rule[int] {
	return ruleOf(func(v int) string {
		if int64(v) < lo || int64(v) > hi {
			return fmt.Sprintf("must be within [%d, %d]", lo, hi)
		}
		return ""
	}, map[string]any{"min": lo, "max": hi})
}

// fraction also rejects NaN, which fails every comparison.
var fraction = ruleOf(isFraction, map[string]any{"min": 0, "max": 1})

func isFraction(v float64) string {
	if !(v >= 0 && v <= 1) {
		return "must be within [0, 1]"
	}
	return ""
}

var nonNegativeFinite = ruleOf(isNonNegativeFinite, map[string]any{"min": 0, "finite": true})

func isNonNegativeFinite(v float64) string {
	if !(v >= 0) || math.IsInf(v, 1) {
		return "must be a finite number of at least 0"
	}
	return ""
}

var positive = ruleOf(isPositive, map[string]any{"min": 0, "exclusive_min": true})

func isPositive(d time.Duration) string {
	if d <= 0 {
		return "must be greater than 0"
	}
	return ""
}

func atLeastDuration(min time.Duration) rule[time.Duration] {
	return ruleOf(func(d time.Duration) string {
		if d < min {
			return "must be at least " + FormatDuration(min)
		}
		return ""
	}, map[string]any{"min": min.Seconds()})
}

var notEmpty = ruleOf(isNotEmpty, map[string]any{"not_empty": true})

func isNotEmpty(s string) string {
	if s == "" {
		return "must not be empty"
	}
	return ""
}

var noEmptyEntries = ruleOf(isNoEmptyEntries, map[string]any{"rule": "no empty entries"})

func isNoEmptyEntries(items []string) string {
	for _, item := range items {
		if item == "" {
			return "must not contain empty entries"
		}
	}
	return ""
}

// whenSet applies r to the value of an Optional, if there is one.
func whenSet[T any](r rule[T]) rule[Optional[T]] {
	return ruleOf(func(o Optional[T]) string {
		if v, ok := o.Get(); ok {
			return r.check(v)
		}
		return ""
	}, r.facts)
}

// mergeFacts joins what an option's rules say for the schema.
func mergeFacts[T any](rules []rule[T]) map[string]any {
	out := map[string]any{}
	for _, r := range rules {
		for k, v := range r.facts {
			if k == "rule" {
				if prev, ok := out[k].(string); ok {
					v = prev + "; " + v.(string)
				}
			}
			out[k] = v
		}
	}
	return out
}
