package maosctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The JSON settings files setup edits (Claude Code's and Gemini CLI's
// settings.json, Codex's hooks.json, .mcp.json) are read into an ordered
// tree and written back in the same order: keys it does not know stay
// where they were with their values (numbers as written, json.Number),
// and what setup adds goes at the end of its object. The output is
// indented by two spaces, so it is stable from one run to the next.

// jsonObject is a JSON object that keeps its keys' order. Its values are
// *jsonObject, []any, string, json.Number, bool or nil.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func newJSONObject() *jsonObject { return &jsonObject{vals: map[string]any{}} }

// get is the value under k (nil, false when absent).
func (o *jsonObject) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// set puts v under k: in place when k is there, else at the end.
func (o *jsonObject) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// del removes k.
func (o *jsonObject) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(x string) bool { return x == k })
}

// object is the object under k, made (at the end) when absent; an error
// when k holds something else.
func (o *jsonObject) object(k, where string) (*jsonObject, error) {
	v, ok := o.vals[k]
	if !ok {
		obj := newJSONObject()
		o.set(k, obj)
		return obj, nil
	}
	obj, isObj := v.(*jsonObject)
	if !isObj {
		return nil, fmt.Errorf("%s%s is not a JSON object; fix it by hand or move it away", where, k)
	}
	return obj, nil
}

// parseJSONSettings reads a settings file's bytes: an object (an empty or
// blank file is an empty object). A syntax error names the line and
// column.
func parseJSONSettings(data []byte) (*jsonObject, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return newJSONObject(), nil
	}
	var check any
	if err := json.Unmarshal(data, &check); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := lineCol(data, syn.Offset)
			return nil, fmt.Errorf("line %d, column %d: %v", line, col, err)
		}
		return nil, err
	}
	if _, ok := check.(map[string]any); !ok {
		return nil, errors.New("not a JSON object at the top")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	return v.(*jsonObject), nil
}

// lineCol is the 1-based line and column of byte offset off of data
// (json.SyntaxError's Offset is just past the byte that failed).
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:max(off-1, 0)]
	line := bytes.Count(before, []byte("\n")) + 1
	return line, len(before) - bytes.LastIndexByte(before, '\n')
}

// decodeOrdered reads one value from dec, objects as *jsonObject.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			arr := []any{}
			for dec.More() {
				v, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		obj := newJSONObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj.set(kt.(string), v) // a later duplicate key wins, as in encoding/json
		}
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

// encodeJSONSettings is v as the file holds it: indented by two spaces,
// no HTML escaping, a newline at the end.
func encodeJSONSettings(v any) []byte {
	var b bytes.Buffer
	writeOrdered(&b, v, "")
	b.WriteByte('\n')
	return b.Bytes()
}

func writeOrdered(w *bytes.Buffer, v any, indent string) {
	inner := indent + "  "
	switch x := v.(type) {
	case *jsonObject:
		if len(x.keys) == 0 {
			w.WriteString("{}")
			return
		}
		w.WriteString("{\n")
		for i, k := range x.keys {
			w.WriteString(inner)
			writeJSONString(w, k)
			w.WriteString(": ")
			writeOrdered(w, x.vals[k], inner)
			if i < len(x.keys)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "}")
	case []any:
		if len(x) == 0 {
			w.WriteString("[]")
			return
		}
		w.WriteString("[\n")
		for i, e := range x {
			w.WriteString(inner)
			writeOrdered(w, e, inner)
			if i < len(x)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "]")
	case string:
		writeJSONString(w, x)
	default: // json.Number, bool, nil, int
		raw, _ := json.Marshal(x) // these always encode
		w.Write(raw)
	}
}

func writeJSONString(w *bytes.Buffer, s string) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	w.Truncate(w.Len() - 1) // Encode's newline
}

// jsonEqual reports whether a and b are the same JSON, in the same order.
func jsonEqual(a, b any) bool {
	return bytes.Equal(encodeJSONSettings(a), encodeJSONSettings(b))
}
