package transport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/secrets"
)

// commit is the last step of every write the API takes, whatever the
// route: the command's free text, as fsm declares it (api.FreeTexter, one
// table for every command), is checked (api.CheckText: UTF-8, control
// characters, JSON depth) and run through the secret guard, then the
// command is proposed. Both happen once, on the node that accepted the
// request, never in apply. A command that addresses agents by name
// (api.Addressing: a send, an interrupt, a task's create and handoff, an
// approval's request) is flagged known_names, so apply refuses names no
// one answers to (unless the cluster setting unknown_recipients is
// accept). The handler has decoded, admitted and validated body before; a
// body fsm does not declare is refused (500), so no command reaches the
// log unscanned.
func (s *Server) commit(r *http.Request, op api.Op, body any) (json.RawMessage, error) {
	body = addressable(body)
	ft, ok := body.(api.FreeTexter)
	if !ok {
		return nil, fmt.Errorf("transport: %s: body %T declares no free text (api.FreeTexter); nothing was proposed", op, body)
	}
	fields := ft.FreeText()
	if err := api.CheckText(fields); err != nil {
		return nil, err
	}
	if err := s.guardText(r, body, fields); err != nil {
		return nil, err
	}
	if a, ok := body.(api.Addressing); ok {
		a.CheckNames()
	}
	return s.prop.Apply(r.Context(), op, body)
}

// guardText runs the secret guard over a command's free text. A JSON
// field is scanned as its text (a rule that matches a key and its value
// sees both) and, redacted, must still be JSON. After a redaction the
// command is normalized and validated again: a redacted field may be over
// its limit, an approval's action canonical again.
func (s *Server) guardText(r *http.Request, body any, fields []api.TextField) error {
	if len(fields) == 0 {
		return nil
	}
	scan := make([]secrets.Field, 0, len(fields))
	var jsons []*jsonText
	for _, f := range fields {
		switch {
		case f.Text != nil:
			scan = append(scan, secrets.Field{Name: f.Name, Text: f.Text})
		case f.JSON != nil && len(*f.JSON) > 0:
			j := jsonField(f.Name, f.JSON)
			jsons = append(jsons, j)
			scan = append(scan, j.field())
		}
	}
	agent := ""
	if a, ok := body.(api.Actor); ok {
		agent = a.Actor()
	}
	return s.guardSecrets(r, agent, scan, func() error {
		for _, j := range jsons {
			if err := j.store(); err != nil {
				return err
			}
		}
		normalize(body, s.opts.Now())
		if v, ok := body.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return err
			}
		}
		return api.CheckText(fields)
	})
}

// jsonText is a JSON field as the guard scans it: its text, put back
// (store) after a redaction.
type jsonText struct {
	name string
	dst  *json.RawMessage
	text string
}

func jsonField(name string, dst *json.RawMessage) *jsonText {
	return &jsonText{name: name, dst: dst, text: string(*dst)}
}

// field is the text as the guard scans it.
func (j *jsonText) field() secrets.Field { return secrets.Field{Name: j.name, Text: &j.text} }

// store puts the (redacted) text back in the command; a redaction that
// broke the JSON (a secret across a string's quotes) is refused, naming
// the field.
func (j *jsonText) store() error {
	if !json.Valid([]byte(j.text)) {
		return &api.FieldError{Field: j.name, Reason: "holds a secret that cannot be redacted in place; remove it and send again"}
	}
	*j.dst = json.RawMessage(j.text)
	return nil
}

// addressable returns body as a pointer (a copy of a value), so its
// FreeText can point into it and the guard redact in place.
func addressable(body any) any {
	v := reflect.ValueOf(body)
	if !v.IsValid() || v.Kind() == reflect.Pointer {
		return body
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	return p.Interface()
}
