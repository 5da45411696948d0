package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Format is the syntax a document is written in.
type Format uint8

const (
	JSON Format = iota // encoding/json: one value, nothing after it
	YAML               // gopkg.in/yaml.v3: one document; quote "*"
)

func (f Format) String() string {
	if f == YAML {
		return "YAML"
	}
	return "JSON"
}

// Decode reads one rules document written in format and validates it.
// Input that is not one document (empty, malformed, several YAML
// documents, data after the JSON value) is an error wrapping ErrMalformed.
// A document with an unknown key, a value of the wrong type or a value
// that breaks a rule is a *FieldError (wrapping ErrInvalid) naming the
// first such field by its path, in sorted key order so the error is the
// same every time. A single string is read as a list of one where a list
// of selectors is expected. The size limit (MaxBytes) is the caller's to
// enforce before reading.
func Decode(data []byte, format Format) (*Document, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, malformed("empty rules document (to remove the rules, DELETE /v1/rules)")
	}
	var v any
	if format == YAML {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			hint := ""
			if strings.Contains(err.Error(), "did not find expected alphabetic or numeric character") {
				hint = ` (quote "*": unquoted, it starts a YAML alias)`
			}
			return nil, malformed("malformed YAML: %v%s", err, hint)
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return nil, malformed("several YAML documents (---): send one")
		}
		var err error
		if v, err = yamlTree(v, ""); err != nil {
			return nil, err
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return nil, malformed("malformed JSON: %v", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, malformed("trailing data after the JSON document")
		}
	}
	return decodeTree(v)
}

// yamlTree turns the maps yaml.v3 decodes with non-string keys into the
// map[string]any tree decodeTree reads, refusing keys that are not
// strings.
func yamlTree(v any, path string) (any, error) {
	at := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			t, err := yamlTree(e, at(k))
			if err != nil {
				return nil, err
			}
			x[k] = t
		}
		return x, nil
	case map[any]any:
		var bad []string
		for k := range x {
			if _, ok := k.(string); !ok {
				bad = append(bad, fmt.Sprint(k))
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad) // the same error every time
			if path == "" {
				path = "rules"
			}
			return nil, fieldErr(path, "key %s is not a string (quote it)", bad[0])
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks := k.(string)
			t, err := yamlTree(e, at(ks))
			if err != nil {
				return nil, err
			}
			out[ks] = t
		}
		return out, nil
	case []any:
		for i, e := range x {
			t, err := yamlTree(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = t
		}
		return x, nil
	default:
		return v, nil
	}
}

// decodeTree builds a document from its decoded JSON or YAML form: a tree
// of map[string]any, []any, string, bool, numbers and nil, as
// encoding/json or yamlTree produce it, and validates it.
func decodeTree(v any) (*Document, error) {
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("rules", "want an object (a mapping) with agents, forbidden, preset, ..., got %s", describe(v))
	}
	var d Document
	err := walkKeys(top, "", []string{"agents", "allowed_interactions", "default", "forbidden",
		"forbidden_interactions", "interrupt", "orchestrator_role", "preset", "reroute_blocked_to"}, func(k string, v any, p string) error {
		var err error
		switch k {
		case "preset":
			d.Preset, err = decodeString(v, p)
		case "orchestrator_role":
			d.OrchestratorRole, err = decodeString(v, p)
		case "default":
			d.Default, err = decodeString(v, p)
		case "reroute_blocked_to":
			d.RerouteBlockedTo, err = decodeString(v, p)
		case "interrupt":
			d.Interrupt, err = decodeSelectors(v, p)
		case "agents":
			d.Agents, err = decodeList(v, p, func(v any, p string) (AgentRule, error) {
				return decodeAgentRule(v, p, true)
			})
		case "allowed_interactions":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return fieldErr(p, "want an object of subject: {can_send_to, can_receive_from}, got %s", describe(v))
			}
			if len(m) > 0 {
				d.AllowedInteractions = make(map[string]AgentRule, len(m))
			}
			for _, key := range sortedKeys(m) {
				r, err := decodeAgentRule(m[key], subjectPath(key), false)
				if err != nil {
					return err
				}
				d.AllowedInteractions[key] = r
			}
		case "forbidden", "forbidden_interactions":
			var list []ForbiddenRule
			list, err = decodeList(v, p, decodeForbiddenRule)
			if k == "forbidden" {
				d.Forbidden = list
			} else {
				d.ForbiddenInteractions = list
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

func decodeAgentRule(v any, p string, withAgent bool) (AgentRule, error) {
	var r AgentRule
	m, ok := v.(map[string]any)
	if !ok {
		return r, fieldErr(p, "want an object with can_send_to and/or can_receive_from, got %s", describe(v))
	}
	known := []string{"can_receive_from", "can_send_to"}
	if withAgent {
		known = append([]string{"agent"}, known...)
	}
	err := walkKeys(m, p, known, func(k string, v any, p string) error {
		var err error
		switch k {
		case "agent":
			r.Agent, err = decodeString(v, p)
		case "can_send_to":
			r.CanSendTo, err = decodeSelectors(v, p)
		case "can_receive_from":
			r.CanReceiveFrom, err = decodeSelectors(v, p)
		}
		return err
	})
	return r, err
}

func decodeForbiddenRule(v any, p string) (ForbiddenRule, error) {
	var r ForbiddenRule
	m, ok := v.(map[string]any)
	if !ok {
		return r, fieldErr(p, "want an object {from, to, reason}, got %s", describe(v))
	}
	err := walkKeys(m, p, []string{"from", "reason", "to"}, func(k string, v any, p string) error {
		var err error
		switch k {
		case "from":
			r.From, err = decodeString(v, p)
		case "to":
			r.To, err = decodeString(v, p)
		case "reason":
			r.Reason, err = decodeString(v, p)
		}
		return err
	})
	return r, err
}

// walkKeys calls fn for each key of m in sorted order (so the first error
// is the same every time), refusing keys not in known.
func walkKeys(m map[string]any, prefix string, known []string, fn func(k string, v any, path string) error) error {
	for _, k := range sortedKeys(m) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if !slices.Contains(known, k) {
			return fieldErr(p, "unknown field; known here: %s", strings.Join(known, ", "))
		}
		if err := fn(k, m[k], p); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func decodeString(v any, p string) (string, error) {
	switch s := v.(type) {
	case string:
		return s, nil
	case nil:
		return "", nil
	default:
		return "", fieldErr(p, "want a string, got %s (quote it)", describe(v))
	}
}

func decodeList[T any](v any, p string, elem func(any, string) (T, error)) ([]T, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fieldErr(p, "want a list, got %s", describe(v))
	}
	out := make([]T, 0, len(list))
	for i, e := range list {
		x, err := elem(e, fmt.Sprintf("%s[%d]", p, i))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// decodeSelectors reads a list of selectors; one string is a list of one.
func decodeSelectors(v any, p string) ([]string, error) {
	if s, ok := v.(string); ok {
		return []string{s}, nil
	}
	return decodeList(v, p, decodeString)
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case time.Time:
		return "a timestamp"
	default:
		return fmt.Sprintf("a number (%v)", v)
	}
}

// subjectPath names an allowed_interactions entry: allowed_interactions.KEY,
// or allowed_interactions["KEY"] when KEY would not read as a path.
func subjectPath(key string) string {
	if key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._-*?:", r))
	}) < 0 {
		return "allowed_interactions." + key
	}
	return fmt.Sprintf("allowed_interactions[%q]", key)
}
