package filter

import (
	"errors"
	"unicode/utf8"

	"github.com/IBM/sarama"
)

// HeaderSourceSystem names the header in which a producer records the system
// that wrote a message; the producer always sets it.
const HeaderSourceSystem = "source-system"

// ErrSourceSystemNotUTF8 reports a source-system header whose value is not
// valid UTF-8. The message is then treated as having no source system; the
// consumer logs the error.
var ErrSourceSystemNotUTF8 = errors.New("source-system header value is not valid UTF-8")

// LookupSourceSystem reads the first header named exactly "source-system".
// Only that first occurrence counts: when its value is null it is absent,
// and when it is not valid UTF-8 it is absent and err is
// ErrSourceSystemNotUTF8. Later headers of the same name are never
// consulted, matching the original.
func LookupSourceSystem(headers []*sarama.RecordHeader) (value string, ok bool, err error) {
	for _, h := range headers {
		if h == nil || string(h.Key) != HeaderSourceSystem {
			continue
		}
		if h.Value == nil {
			return "", false, nil
		}
		if !utf8.Valid(h.Value) {
			return "", false, ErrSourceSystemNotUTF8
		}
		return string(h.Value), true, nil
	}
	return "", false, nil
}

// SourceSystem is LookupSourceSystem for callers that need not log an
// invalid value.
func SourceSystem(headers []*sarama.RecordHeader) (string, bool) {
	v, ok, _ := LookupSourceSystem(headers)
	return v, ok
}

// IsLoop reports whether a message was produced by this consumer group
// itself: its source system is present and equals the group id exactly. Such
// messages are committed and skipped to break produce/consume loops.
func IsLoop(sourceSystem string, present bool, groupID string) bool {
	return present && sourceSystem == groupID
}
