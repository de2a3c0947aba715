package config

import (
	"fmt"
	"strings"
)

// MaxTopicNameLength is the longest topic name Kafka accepts.
const MaxTopicNameLength = 249

// TopicNameError says why a name is not one Kafka accepts as a topic.
type TopicNameError struct {
	Name   string
	Reason string
}

func (e *TopicNameError) Error() string { return fmt.Sprintf("topic %q: %s", e.Name, e.Reason) }

// topicNameRule is what CheckTopicName allows, in the words of its errors.
const topicNameRule = "a topic name must be 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', and not \".\" or \"..\""

// CheckTopicName applies Kafka's rules for topic names (the broker's own
// check, made before anything is sent, so that a name is never cut short
// or rewritten on the way): 1 to 249 characters from [a-zA-Z0-9._-], and
// neither "." nor "..". It returns a *TopicNameError naming the topic and
// the first offending byte.
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return &TopicNameError{Name: name, Reason: "must not be empty (" + topicNameRule + ")"}
	case len(name) > MaxTopicNameLength:
		return &TopicNameError{Name: name, Reason: fmt.Sprintf("is %d bytes long (%s)", len(name), topicNameRule)}
	case name == "." || name == "..":
		return &TopicNameError{Name: name, Reason: "is not allowed (" + topicNameRule + ")"}
	}
	for i := 0; i < len(name); i++ {
		if !topicByte(name[i]) {
			return &TopicNameError{Name: name, Reason: fmt.Sprintf("has %q at byte %d (%s)", name[i:i+1], i, topicNameRule)}
		}
	}
	return nil
}

func topicByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}

// topicName is the option rule for a single topic name ("" is allowed: it
// means "none").
var topicName = ruleOf(isTopicName, map[string]any{"rule": topicNameRule})

func isTopicName(name string) string {
	if name == "" {
		return ""
	}
	if err := CheckTopicName(name); err != nil {
		return err.(*TopicNameError).Reason
	}
	return ""
}

// topicNames is the option rule for a list of topics, where an entry
// starting with '^' is a regular expression rather than a name.
var topicNames = ruleOf(areTopicNames, map[string]any{"rule": "names that are not patterns: " + topicNameRule})

func areTopicNames(topics []string) string {
	for _, t := range topics {
		if strings.HasPrefix(t, "^") || t == "" {
			continue
		}
		if err := CheckTopicName(t); err != nil {
			return "entry " + err.Error()
		}
	}
	return ""
}
