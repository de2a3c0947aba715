package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/goccy/go-json"
)

// decodeObject reads one JSON object of options. Numbers are kept as
// json.Number so that integers are checked exactly. Empty input and null
// stand for "no options".
func decodeObject(data []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("config: options are not valid JSON: %w", err)
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: options must be a single JSON object, found more data after it")
	}
	switch obj := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return obj, nil
	}
	return nil, fmt.Errorf("config: options must be a JSON object, got %s", describeJSON(v))
}
