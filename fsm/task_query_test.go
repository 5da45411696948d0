package fsm

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func taskIDs(p api.TaskPage) []string {
	out := []string{}
	for _, t := range p.Tasks {
		out = append(out, t.ID)
	}
	return out
}

func TestTasksQuery(t *testing.T) {
	b := newTaskBox(t)
	b.register("ann", "orchestrator")
	var ids []string
	for i, to := range []string{"rita", "role:reviewer", "capability:go", "rita", "eve", "role:reviewer"} {
		c := b.newTask(to)
		if i%2 == 1 {
			c.From = "ann"
		}
		b.create(c)
		ids = append(ids, c.ID)
	}
	b.claim(ids[0], "rita")
	b.succeed(ids[3], "rita", b.claim(ids[3], "rita").Fence)
	b.claim(ids[1], "rex")
	b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: ids[4], From: "boss"})

	for _, tc := range []struct {
		name string
		q    api.TaskQuery
		want []string
		more bool
	}{
		{"all, in creation order", api.TaskQuery{}, ids, false},
		{"a page", api.TaskQuery{Limit: 2}, ids[:2], true},
		{"the next page", api.TaskQuery{After: b.task(ids[1]).Seq, Limit: 2}, ids[2:4], true},
		{"the last page", api.TaskQuery{After: b.task(ids[3]).Seq, Limit: 2}, ids[4:], false},
		{"ready", api.TaskQuery{State: api.TaskReady}, []string{ids[2], ids[5]}, false},
		{"running", api.TaskQuery{State: api.TaskRunning}, []string{ids[0], ids[1]}, false},
		{"succeeded", api.TaskQuery{State: api.TaskSucceeded}, []string{ids[3]}, false},
		{"cancelled", api.TaskQuery{State: api.TaskCancelled}, []string{ids[4]}, false},
		{"to a role", api.TaskQuery{To: "role:reviewer"}, []string{ids[1], ids[5]}, false},
		{"to an agent", api.TaskQuery{To: "rita"}, []string{ids[0], ids[3]}, false},
		{"from", api.TaskQuery{From: "ann"}, []string{ids[1], ids[3], ids[5]}, false},
		{"claimed by, ended or not", api.TaskQuery{ClaimedBy: "rita"}, []string{ids[0], ids[3]}, false},
		{"claimed by and running", api.TaskQuery{ClaimedBy: "rita", State: api.TaskRunning}, []string{ids[0]}, false},
		{"to and from", api.TaskQuery{To: "role:reviewer", From: "ann", Limit: 1}, []string{ids[1]}, true},
		{"final state and to", api.TaskQuery{State: api.TaskSucceeded, To: "rita"}, []string{ids[3]}, false},
		{"no match", api.TaskQuery{State: api.TaskWaiting}, []string{}, false},
		{"nobody's", api.TaskQuery{ClaimedBy: "zed"}, []string{}, false},
	} {
		p, err := b.f.Tasks(tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := taskIDs(p); !slices.Equal(got, tc.want) || p.HasMore != tc.more {
			t.Errorf("%s: %q has_more=%t, want %q has_more=%t", tc.name, got, p.HasMore, tc.want, tc.more)
		}
		for _, task := range p.Tasks {
			if task.History != nil {
				t.Errorf("%s: a listed task carries its history", tc.name)
			}
		}
	}
	for _, tc := range []struct {
		q     api.TaskQuery
		field string
	}{
		{api.TaskQuery{State: "done"}, "state"},
		{api.TaskQuery{To: "team:x"}, "to"},
		{api.TaskQuery{From: "Boss"}, "from"},
		{api.TaskQuery{ClaimedBy: "a b"}, "claimed_by"},
	} {
		var fe *api.FieldError
		if _, err := b.f.Tasks(tc.q); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Tasks(%+v) = %v, want a field error on %s", tc.q, err, tc.field)
		}
	}
	if _, err := b.f.Task("task-404"); !errors.Is(err, api.ErrNotFound) || err.Error() != "task task-404: not found" {
		t.Errorf("Task of an unknown id = %v", err)
	}
}

// The stream's index: each entry's updates, with the task as that entry
// left it, whole entries per page.
func TestTaskEvents(t *testing.T) {
	b := newTaskBox(t)
	start := b.idx
	a := b.newTask("rita")
	b.create(a)
	d1, d2 := b.newTask("rex", a.ID), b.newTask("eve", a.ID)
	b.create(d1)
	b.create(d2)
	cl := b.claim(a.ID, "rita")
	b.send(b.msg("boss", "unrelated", "rex"))
	done := b.succeed(a.ID, "rita", cl.Fence)

	p, err := b.f.TaskEvents(start, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range p.Updates {
		got = append(got, itoa(u.Event.Seq)+" "+u.Task.ID+" "+u.Event.Event+" "+string(u.Task.State))
	}
	want := []string{
		itoa(start+1) + " " + a.ID + " created ready",
		itoa(start+2) + " " + d1.ID + " created waiting",
		itoa(start+3) + " " + d2.ID + " created waiting",
		itoa(cl.Seq) + " " + a.ID + " claimed running",
		itoa(done.Seq) + " " + a.ID + " completed succeeded",
		itoa(done.Seq) + " " + d1.ID + " ready ready",
		itoa(done.Seq) + " " + d2.ID + " ready ready",
	}
	if !slices.Equal(got, want) || p.HasMore {
		t.Fatalf("updates\n%q\nwant\n%q (has_more %t)", got, want, p.HasMore)
	}
	// As of its entry: the claim's update shows the lease, not the end.
	claimed := p.Updates[3].Task
	if claimed.ClaimedBy != "rita" || claimed.LeaseExpires == nil || claimed.Completion != nil || claimed.Description != a.Description ||
		claimed.History != nil || p.Updates[3].Event.Actor != "rita" || !p.Updates[3].Event.Time.Equal(claimed.Updated) {
		t.Errorf("claim update = %+v, event %+v", claimed, p.Updates[3].Event)
	}

	// Pages hold whole entries: a limit of 5 takes the completing entry's
	// three updates along (7), one of 4 stops before it.
	for _, tc := range []struct {
		limit int
		n     int
		more  bool
	}{{1, 1, true}, {4, 4, true}, {5, 7, false}, {7, 7, false}} {
		p, err := b.f.TaskEvents(start, tc.limit)
		if err != nil || len(p.Updates) != tc.n || p.HasMore != tc.more {
			t.Errorf("limit %d: %d updates, has_more %t, %v; want %d, %t", tc.limit, len(p.Updates), p.HasMore, err, tc.n, tc.more)
		}
	}
	if p, _ := b.f.TaskEvents(done.Seq-1, 1); len(p.Updates) != 3 {
		t.Errorf("resuming before the completing entry: %d updates, want its 3", len(p.Updates))
	}
	if p, _ := b.f.TaskEvents(done.Seq, 0); len(p.Updates) != 0 || p.HasMore {
		t.Errorf("after the last entry: %+v", p)
	}
}

func TestNextDeadlineClosed(t *testing.T) {
	f, _ := openTemp(t)
	if _, ok := f.NextDeadline(); ok {
		t.Error("an empty state has a deadline")
	}
	_ = f.Close()
	if _, ok := f.NextDeadline(); ok {
		t.Error("a closed state has a deadline")
	}
	if _, err := f.Task("t"); !errors.Is(err, ErrClosed) {
		t.Errorf("Task after Close = %v", err)
	}
}

// The lease index keeps the earliest end first, whatever the claim order.
func TestNextDeadlineIsTheEarliestLease(t *testing.T) {
	b := newTaskBox(t)
	long, short := b.newTask("rita"), b.newTask("rex")
	long.TimeoutSeconds, short.TimeoutSeconds = 600, 30
	b.create(long)
	b.create(short)
	b.claim(long.ID, "rita")
	cl := b.claim(short.ID, "rex")
	if due, ok := b.f.NextDeadline(); !ok || !due.Equal(*cl.LeaseExpires) {
		t.Errorf("NextDeadline = %s, want the short lease %s", due, cl.LeaseExpires)
	}
	// Progress moves it: the old key goes, one key per running task stays.
	b.jump(b.now().Add(20 * time.Second))
	pr := mustTaskResult(t, b.ok(api.OpTaskProgress, api.TaskProgressCommand{ID: short.ID, Agent: "rex", Fence: cl.Fence}))
	if due, _ := b.f.NextDeadline(); !due.Equal(*pr.LeaseExpires) {
		t.Errorf("after progress: NextDeadline = %s, want %s", due, pr.LeaseExpires)
	}
	var leases []uint64
	_ = b.f.view(func(tx *bbolt.Tx) error {
		leases = leasesUpTo(tx, math.MaxInt64)
		return nil
	})
	if len(leases) != 2 || leases[0] != b.task(short.ID).Seq {
		t.Errorf("lease index = %v, want the short lease then the long one", leases)
	}
}
