package dialect

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/fsm"
)

func TestMapRefusals(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`[1,2]`, "not a JSON object"},
		{`{"from":"a","content":"x"`, "not a JSON object"},
		{`{"to":"b","content":"x"}`, "from: missing"},
		{`{"from":"a","content":"x"}`, "to: missing"},
		{`{"from":"a","to":"b","content":"x","timestamp":"yesterday"}`, "timestamp"},
		{`{"from":"a","to":"b","content":7}`, "content"},
		{`{"from":"???","to":"b","content":"x"}`, "from"},
		{`{"from":"a","to":["b",3],"content":"x"}`, "to"},
		{`{"from":"a","to":"b","id":7,"content":"x"}`, "id: want a string"},
	} {
		_, err := Map([]byte(tc.body), Place{FileName: "other.json", Folder: "ch"}, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Map(%s) = %v, want an error with %q", tc.body, err, tc.want)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{"Agent Name": "agent-name", "_x": "x", "QC-1": "qc-1", "!!!": "", strings.Repeat("a", 70): strings.Repeat("a", 64)} {
		if got := SanitizeName(in); got != want || (got != "" && !fsm.ValidName(got)) {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}
