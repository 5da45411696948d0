package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// durationString reads b, a JSON duration of field, when it is a string
// ("10m", "1h30m"): the duration and true; an error, naming field and
// the forms like says, for a string that is not a Go duration. Any other
// JSON is not for it (false): the types read a number of seconds each
// by its own range rule.
func durationString(b []byte, field, like string) (time.Duration, bool, error) {
	if len(b) == 0 || b[0] != '"' {
		return 0, false, nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, true, err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, true, fmt.Errorf("%s: %q is not a duration like %s", field, s, like)
	}
	return v, true, nil
}
