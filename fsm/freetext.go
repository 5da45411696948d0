package fsm

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
)

// Free text: the one table of what each command stores as a client wrote
// it. Every command body implements FreeTexter, here and only here, so a
// new command cannot be added without saying what text it stores
// (TestEveryOpDeclaresItsFreeText enumerates the registry). The node that
// accepts a request checks these fields once, before it proposes
// (CheckText) and runs the secret guard over them (transport); apply never
// does either, so a rule tightened here never changes how an entry that an
// older build committed applies.

// FreeTexter is a command body: FreeText lists its free-text fields (nil
// when it stores none a client wrote: ids checked by a pattern, numbers,
// or text the node writes itself).
type FreeTexter interface {
	FreeText() []api.TextField
}

// Actor is implemented by the commands that store free text: the agent
// the command acts as (the name the audit trail gives a refusal of it).
type Actor interface {
	Actor() string
}

// MaxJSONDepth is how deeply any JSON a command carries may nest: objects
// and arrays, the command's own included (Encode refuses deeper). Go's
// decoder stops at 10,000, and every reader adds a few levels around a
// stored value (a page, an event), so a bound far below keeps every entry
// decodable at apply and every stored value readable by every client.
const MaxJSONDepth = 64

// CheckText checks a command's free text before it is proposed, naming
// the field: valid UTF-8 everywhere, no control characters other than tab
// and newline in a TextLine, and a TextJSON value valid JSON nested at most
// MaxJSONDepth deep. The error is a *FieldError.
func CheckText(fields []api.TextField) error {
	for _, f := range fields {
		switch {
		case f.Text != nil:
			if !utf8.ValidString(*f.Text) {
				return api.FieldErrorf(f.Name, "not valid UTF-8")
			}
			if f.Kind == api.TextLine {
				if i := strings.IndexFunc(*f.Text, lineControl); i >= 0 {
					r, _ := utf8.DecodeRuneInString((*f.Text)[i:])
					return api.FieldErrorf(f.Name, "control character %U at byte %d: a title, id or label may hold tab and newline, no other control character", r, i)
				}
			}
		case f.JSON != nil && len(*f.JSON) > 0:
			if err := checkJSON(f.Name, *f.JSON, MaxJSONDepth); err != nil {
				return err
			}
		}
	}
	return nil
}

func lineControl(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }

// checkJSON refuses b unless it is one valid JSON value of valid UTF-8
// nested at most max deep.
func checkJSON(field string, b []byte, max int) error {
	if err := checkShape(field, b, max); err != nil {
		return err
	}
	if !json.Valid(b) {
		return api.FieldErrorf(field, "not valid JSON")
	}
	return nil
}

// checkShape refuses JSON text b that is not valid UTF-8 or nests deeper
// than max (b is known to be valid JSON, or checked after).
func checkShape(field string, b []byte, max int) error {
	if !utf8.Valid(b) {
		return api.FieldErrorf(field, "not valid UTF-8")
	}
	if d := jsonDepth(b); d > max {
		return api.FieldErrorf(field, "JSON nested %d deep, at most %d", d, max)
	}
	return nil
}

// jsonDepth is how deeply b's objects and arrays nest; strings are
// skipped, escapes included. It does not validate: json.Valid does.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// --- the table: one method per command body ---

// The commands below store no text a client wrote: names and ids checked
// by a pattern, numbers, hashes, or words the node writes itself (an
// audit's reason, a node event's).

// --- who acts: the audit's name for a refused command ---
