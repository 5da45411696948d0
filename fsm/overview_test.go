package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// overviewLog stores seven messages: seqs 1..7 on channels a, b, a, a, b,
// a, b; #4 is private, #2 has a title and a type, #5 goes to two agents.
func overviewLog(t *testing.T) *FSM {
	t.Helper()
	f, _ := openTemp(t)
	chans := []string{"a", "b", "a", "a", "b", "a", "b"}
	var logs []*raft.Log
	for i, ch := range chans {
		seq := i + 1
		m := testMessage(msgID(seq), ch, fmt.Sprintf("secret content %d", seq))
		switch seq {
		case 2:
			m.Title, m.Type, m.Priority = "Triage new issue #123", "task_assign", "high"
		case 4:
			m.Title, m.Visibility = "private plans", "private"
		case 5:
			m.To = api.Recipients{"claude", "gemini"}
		}
		logs = append(logs, sendEntry(t, uint64(seq), baseTS+int64(seq)*int64(time.Second), m))
	}
	for _, r := range f.ApplyBatch(logs) {
		mustSendResult(t, r)
	}
	return f
}

func overviewSeqs(p api.OverviewPage) []uint64 {
	var out []uint64
	for _, e := range p.Messages {
		out = append(out, e.Seq)
	}
	return out
}

func TestOverviewPaging(t *testing.T) {
	f := overviewLog(t)
	for _, c := range []struct {
		channel string
		after   uint64
		limit   int
		want    []uint64
		more    bool
	}{
		{"", 0, 3, []uint64{1, 2, 3}, true},
		{"", 3, 3, []uint64{4, 5, 6}, true},
		{"", 6, 3, []uint64{7}, false},
		{"", 4, 3, []uint64{5, 6, 7}, false}, // exactly the rest: no more
		{"", 7, 3, nil, false},
		{"", 0, 0, []uint64{1, 2, 3, 4, 5, 6, 7}, false}, // default limit
		{"a", 0, 2, []uint64{1, 3}, true},
		{"a", 3, 2, []uint64{4, 6}, false},
		{"b", 0, 10, []uint64{2, 5, 7}, false},
		{"b", 2, 1, []uint64{5}, true},
		{"nope", 0, 10, nil, false},
	} {
		page, err := f.Overview(c.channel, c.after, c.limit)
		if err != nil {
			t.Fatalf("Overview(%q, %d, %d): %v", c.channel, c.after, c.limit, err)
		}
		if got := overviewSeqs(page); !slices.Equal(got, c.want) || page.HasMore != c.more {
			t.Errorf("Overview(%q, %d, %d) = %v more=%t, want %v more=%t", c.channel, c.after, c.limit, got, page.HasMore, c.want, c.more)
		}
		if page.Messages == nil {
			t.Errorf("Overview(%q, %d, %d): nil list, want [] in JSON", c.channel, c.after, c.limit)
		}
		for _, e := range page.Messages {
			if c.channel != "" && e.Channel != c.channel {
				t.Errorf("channel %s page holds #%d of %s", c.channel, e.Seq, e.Channel)
			}
		}
	}
}

func TestOverviewEntries(t *testing.T) {
	f := overviewLog(t)
	page, err := f.Overview("", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	e := page.Messages[1]
	want := api.OverviewEntry{
		Seq: 2, ID: msgID(2), Timestamp: time.Unix(0, baseTS+2*int64(time.Second)).UTC(), Channel: "b",
		From: "codex", To: []string{"claude"}, Recipients: []string{"claude"},
		Type: "task_assign", Priority: "high", Title: "Triage new issue #123",
	}
	if fmt.Sprintf("%+v", e) != fmt.Sprintf("%+v", want) {
		t.Errorf("entry #2 = %+v\nwant      %+v", e, want)
	}
	if p := page.Messages[3]; !p.Private || p.Title != PrivateText {
		t.Errorf("private #4 = %+v, want its title hidden", p)
	}
	if got := page.Messages[4].To; !slices.Equal(got, []string{"claude", "gemini"}) {
		t.Errorf("#5 to = %v", got)
	}
	// No content, in any form, on the wire.
	b, err := json.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, no := range []string{"secret content", `"content"`, "private plans"} {
		if strings.Contains(string(b), no) {
			t.Errorf("overview JSON contains %q: %s", no, b)
		}
	}
}
