package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-json"
)

// A kind reads one Go type from the two text sources and prints it back for
// error messages. Parse errors are plain messages in the "<rule>, got
// <value>" form; the loader prefixes the option name.
type kind[T any] struct {
	// text reads the environment syntax. Nil means the type cannot come from
	// an environment variable.
	text func(s string) (T, error)
	// json reads a value produced by decodeObject. JSON null never reaches it
	// unless nullIsValue is set.
	json func(v any) (T, error)
	// nullIsValue makes JSON null an explicit value instead of "unset".
	nullIsValue bool
	format      func(T) string
	// schemaType names the type in the option schema: "string", "bool",
	// "int", "float", "duration" (seconds, or a duration string), "list"
	// (a string or a list of strings), "enum", "collections".
	schemaType string
}

// parseError is a parse failure whose text is a complete "<rule>, got
// <value>" message but which still wraps the underlying cause.
type parseError struct {
	message string
	cause   error
}

func (e *parseError) Error() string { return e.message }
func (e *parseError) Unwrap() error { return e.cause }

// parseDurationText reads a duration string and explains a failure.
func parseDurationText(s, rule string) (time.Duration, error) {
	d, err := ParseDuration(s)
	var de *DurationError
	if errors.As(err, &de) {
		return 0, &parseError{message: fmt.Sprintf("%s, got %q (%s)", rule, s, de.Reason), cause: err}
	}
	return d, err
}

var durationKind = kind[time.Duration]{
	schemaType: "duration",
	text: func(s string) (time.Duration, error) {
		return parseDurationText(s, `must be a duration such as "100ms", "30s" or "1h 30m"`)
	},
	json: func(v any) (time.Duration, error) {
		switch v := v.(type) {
		case string:
			return parseDurationText(v, `must be a number of seconds or a duration such as "30s"`)
		case json.Number:
			secs, err := v.Float64()
			// A Duration holds about 292 years; refuse anything at the edge
			// rather than let the conversion overflow.
			if err != nil || math.Abs(secs) >= math.MaxInt64/float64(time.Second) {
				return 0, fmt.Errorf("must be a number of seconds that fits in a duration, got %s", v)
			}
			return time.Duration(math.Round(secs * float64(time.Second))), nil
		}
		return 0, fmt.Errorf(`must be a number of seconds or a duration such as "30s", got %s`, describeJSON(v))
	},
	format: FormatDuration,
}

var intKind = kind[int]{
	schemaType: "int",
	text: func(s string) (int, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
		if err != nil {
			return 0, fmt.Errorf("must be a whole number, got %q", s)
		}
		return int(n), nil
	},
	json: func(v any) (int, error) {
		n, ok := wholeNumber(v)
		if !ok || int64(int(n)) != n { // the second test matters on 32-bit platforms
			return 0, fmt.Errorf("must be a whole number, got %s", describeJSON(v))
		}
		return int(n), nil
	},
	format: strconv.Itoa,
}

var floatKind = kind[float64]{
	schemaType: "float",
	text: func(s string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("must be a number, got %q", s)
		}
		return f, nil
	},
	json: func(v any) (float64, error) {
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return f, nil
			}
		}
		return 0, fmt.Errorf("must be a number, got %s", describeJSON(v))
	},
	format: func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) },
}

var boolKind = kind[bool]{
	schemaType: "bool",
	text: func(s string) (bool, error) {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("must be true or false, got %q", s)
	},
	json: func(v any) (bool, error) {
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("must be true or false, got %s", describeJSON(v))
	},
	format: strconv.FormatBool,
}

// stringKind keeps text verbatim: names and passwords may legitimately
// contain surrounding spaces.
var stringKind = kind[string]{
	schemaType: "string",
	text:       func(s string) (string, error) { return s, nil },
	json: func(v any) (string, error) {
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", fmt.Errorf("must be a string, got %s", describeJSON(v))
	},
	format: func(s string) string { return strconv.Quote(s) },
}

// listKind reads comma-separated text or a JSON array of strings. Items are
// trimmed and empty items dropped, whichever the source.
var listKind = kind[[]string]{
	schemaType: "list",
	text:       func(s string) ([]string, error) { return splitList(s), nil },
	json: func(v any) ([]string, error) {
		switch v := v.(type) {
		case string:
			return splitList(v), nil
		case []any:
			items := make([]string, 0, len(v))
			for _, item := range v {
				s, ok := item.(string)
				if !ok {
					return nil, fmt.Errorf("must be a list of strings, got an item %s", describeJSON(item))
				}
				if s = strings.TrimSpace(s); s != "" {
					items = append(items, s)
				}
			}
			return items, nil
		}
		return nil, fmt.Errorf("must be a list of strings or a comma-separated string, got %s", describeJSON(v))
	},
	format: formatList,
}

// prefixListKind is listKind for allowed_events. The original turns an empty
// variable into one empty prefix, which lets every event through; we
// represent that directly as "no filter" rather than as an empty list, which
// validation rejects when given explicitly.
var prefixListKind = kind[[]string]{
	schemaType: "list",
	text: func(s string) ([]string, error) {
		items := splitList(s)
		if len(items) == 0 {
			return nil, nil
		}
		return items, nil
	},
	json:   listKind.json,
	format: formatList,
}

// enumKind reads a string-based enumeration. Membership is checked during
// validation, so that values set from Go are checked the same way.
func enumKind[T ~string]() kind[T] {
	return kind[T]{
		schemaType: "enum",
		text:       func(s string) (T, error) { return T(strings.TrimSpace(s)), nil },
		json: func(v any) (T, error) {
			s, err := stringKind.json(v)
			return T(s), err
		},
		format: func(v T) string { return strconv.Quote(string(v)) },
	}
}

// optionalKind wraps a kind so that the word "none" (any case) stands for an
// absent value, in the environment and in JSON strings. With nullIsValue,
// JSON null means absent too, instead of "not given".
func optionalKind[T any](inner kind[T], nullIsValue bool) kind[Optional[T]] {
	return kind[Optional[T]]{
		schemaType: inner.schemaType,
		text: func(s string) (Optional[T], error) {
			if isNone(s) {
				return None[T](), nil
			}
			v, err := inner.text(s)
			return Some(v), err
		},
		json: func(v any) (Optional[T], error) {
			if s, ok := v.(string); (ok && isNone(s)) || v == nil {
				return None[T](), nil
			}
			val, err := inner.json(v)
			return Some(val), err
		},
		nullIsValue: nullIsValue,
		format: func(o Optional[T]) string {
			if v, ok := o.Get(); ok {
				return inner.format(v)
			}
			return "none"
		},
	}
}

// optionalStringKind is for optional text where "none" is an ordinary value (a directory may be
// called that); only JSON null or leaving it out means absent.
var optionalStringKind = kind[Optional[string]]{
	schemaType: "string",
	text:       func(s string) (Optional[string], error) { return Some(s), nil },
	json: func(v any) (Optional[string], error) {
		s, err := stringKind.json(v)
		return Some(s), err
	},
	format: func(o Optional[string]) string {
		if v, ok := o.Get(); ok {
			return strconv.Quote(v)
		}
		return "none"
	},
}

func isNone(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "none") }

func splitList(s string) []string {
	items := []string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func formatList(items []string) string {
	quoted := make([]string, len(items))
	for i, item := range items {
		quoted[i] = strconv.Quote(item)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// wholeNumber accepts JSON numbers without a fractional part that fit in an
// int64. "3.0" and "1e3" count as whole; "2.5" does not.
func wholeNumber(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// wholeUnsigned is wholeNumber for the full uint64 range.
func wholeUnsigned(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return u, true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 {
		return 0, false
	}
	return uint64(f), true
}

// describeJSON prints a decoded JSON value the way it appeared in the input.
func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}
