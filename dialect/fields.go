package dialect

import (
	"encoding/json"
	"time"

	"github.com/maos-project/maos/api"
)

// What the message, task and approval mappings do alike with a field,
// one copy. set keeps an original a mapping changed under the context
// (a message's metadata) key it names.

// sanitized maps v, the value of field, onto the maos name rule
// (SanitizeName); a value with no letter or digit is an error naming
// field, a changed one is kept under key.
func sanitized(field, v, key string, set func(k, v string)) (string, error) {
	n := SanitizeName(v)
	if n == "" {
		return "", fieldErr(field, "%q has no letter or digit", v)
	}
	if n != v {
		set(key, v)
	}
	return n, nil
}

// mapFrom is the sender of a task or approval: from, else from_agent,
// sanitized (the original kept as original_from); none is an error
// naming field.
func mapFrom(obj map[string]json.RawMessage, field string, set func(k, v string)) (string, error) {
	from, err := firstString(obj, "from", "from_agent")
	if err != nil {
		return "", err
	}
	if from == "" {
		return "", fieldErr(field, "missing: no from or from_agent field")
	}
	return sanitized(field, from, "original_from", set)
}

// mapChannel is the channel of a task or approval: session_id, else
// channel, sanitized (the original kept as original_session_id); "" when
// neither is given (the command's default applies).
func mapChannel(obj map[string]json.RawMessage, set func(k, v string)) (string, error) {
	ch, err := firstString(obj, "session_id", "channel")
	if err != nil || ch == "" {
		return "", err
	}
	return sanitized("channel", ch, "original_session_id", set)
}

// priorityOf is p mapped as a message's priority (mapPriority), the
// original kept as original_priority when it changed.
func priorityOf(p string, set func(k, v string)) api.Priority {
	pr := mapPriority(p)
	if string(pr) != p {
		set("original_priority", p)
	}
	return pr
}

// contextJSON is ctx as one JSON object for field (keys sorted, values
// compacted); nil when ctx is empty.
func contextJSON(field string, ctx map[string]json.RawMessage) (json.RawMessage, error) {
	if len(ctx) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ctx)
	if err != nil {
		return nil, fieldErr(field, "%v", err)
	}
	return b, nil
}

// checked is c when a copy of it, normalized as the cluster will (at the
// zero time), validates; else the Validate error.
func checked[T any, P interface {
	*T
	Normalize(time.Time)
	Validate() error
}](c P) (P, error) {
	check := *c
	P(&check).Normalize(time.Time{})
	if err := P(&check).Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
