package fsm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// taskLog builds n entries of task work from a fixed seed, after a few
// registrations: creates (with dependencies, some unknown; retried and
// conflicting), claims by agents in and out of the queues, progress,
// completions, handoffs and cancels under fences that are current, stale
// or made up, retries of earlier entries, ticks, the escalation target
// and a rules document with reroute_blocked_to switched on and off.
// Entries are ~200 ms apart with proposer clocks off by up to ±300 ms, so
// leases of 2 to 5 s lapse and backoffs pass within the log. Approvals
// ride along: requests (retried, conflicting, some invalid) with 1 to 4 s
// timeouts that expire or escalate within the log, decisions by listed
// and unlisted agents on current and stale hashes, modifies, cancels, and
// decisions on the approvals requires_approval completions open (their
// ids derived from the proposer's time, which apply may have moved: then
// they are refused as unknown).
func taskLog(tb testing.TB, seed uint64, n int) []*raft.Log {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	agents := []string{"rita", "rex", "eve", "zed"}
	var logs []*raft.Log
	idx := uint64(0)
	ts := func() int64 {
		return baseTS + int64(idx)*int64(200*time.Millisecond) + rng.Int64N(int64(600*time.Millisecond)) - int64(300*time.Millisecond)
	}
	add := func(op api.Op, body any) {
		idx++
		logs = append(logs, opEntry(tb, idx, ts(), op, body))
	}
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "boss", Role: "orchestrator"})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ann", Role: "orchestrator"})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "rita", Role: "reviewer", Capabilities: []string{"go"}})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "rex", Role: "reviewer"})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "eve", Role: "engineer", Capabilities: []string{"go"}})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "sam", Role: "supervisor"})

	type claim struct {
		task, agent string
		fence       uint64
	}
	type appr struct {
		id, from string
		deciders []string // who may decide it
		hashes   []string // the action's hashes so far, first the requested one
	}
	var tasks []api.TaskCreateCommand
	var claims []claim
	var apprs []appr
	var requests []api.ApprovalRequestCommand
	hashOf := func(action json.RawMessage) string {
		h, err := api.ActionHash(action)
		if err != nil {
			tb.Fatal(err)
		}
		return h
	}
	for len(logs) < n {
		k := rng.IntN(120)
		switch {
		case k >= 100:
			people := append(agents, "boss", "ann", "sam")
			switch j := k - 100; {
			case j < 5 || len(apprs) == 0:
				c := api.ApprovalRequestCommand{ID: fmt.Sprintf("appr-%d", idx+1), From: pick(people), Quorum: 1 + rng.IntN(2),
					Title: fmt.Sprintf("decide %d", idx+1), Action: json.RawMessage(fmt.Sprintf(`{"n":%d}`, idx+1)),
					Timeout: api.ApprovalTimeout(time.Duration(2+rng.IntN(5)) * time.Second), OnTimeout: pick([]string{api.OnTimeoutReject, api.OnTimeoutEscalate})}
				var deciders []string
				for _, a := range []string{"rita", "rex", "sam", "role:reviewer"} {
					if rng.IntN(2) == 0 {
						c.Approvers = append(c.Approvers, a)
						if a == "role:reviewer" {
							a = pick([]string{"rita", "rex"})
						}
						deciders = append(deciders, a)
					}
				}
				if rng.IntN(4) == 0 {
					c.Options = []string{api.DecisionApprove, api.DecisionReject}
				}
				c.Normalize(time.Unix(0, baseTS))
				requests = append(requests, c)
				apprs = append(apprs, appr{c.ID, c.From, deciders, []string{hashOf(c.Action)}})
				add(api.OpApprovalRequest, c)
			case j < 7:
				c := requests[rng.IntN(len(requests))]
				if rng.IntN(2) == 0 {
					c.Rationale = "changed"
				}
				add(api.OpApprovalRequest, c)
			case j < 16:
				ap := apprs[len(apprs)-1-rng.IntN(min(len(apprs), 4))]
				d := api.ApprovalDecideCommand{ID: ap.id, Approver: pick(people), Decision: pick(api.Decisions), ActionHash: ap.hashes[len(ap.hashes)-1]}
				if len(ap.deciders) > 0 && rng.IntN(4) > 0 { // mostly a listed approver
					d.Approver = pick(ap.deciders)
				}
				if rng.IntN(5) == 0 {
					d.ActionHash = ap.hashes[rng.IntN(len(ap.hashes))]
				}
				if d.Decision == api.DecisionModify {
					d.Action = json.RawMessage(fmt.Sprintf(`{"n":%d,"modified":true}`, idx+1))
					ap.hashes = append(ap.hashes, hashOf(d.Action))
					for i := range apprs {
						if apprs[i].id == ap.id {
							apprs[i] = ap
						}
					}
				}
				add(api.OpApprovalDecide, d)
			default:
				ap := apprs[rng.IntN(len(apprs))]
				from := ap.from
				if rng.IntN(4) == 0 {
					from = pick(people)
				}
				add(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: ap.id, From: from, Reason: "moot"})
			}
		case k < 18 || len(tasks) == 0:
			c := api.TaskCreateCommand{ID: fmt.Sprintf("task-%d", idx+1), From: pick([]string{"boss", "ann"}),
				To: pick(append(agents, "role:reviewer", "capability:go", "role:nobody")), Title: fmt.Sprintf("job %d", idx+1),
				TimeoutSeconds: 2 + rng.IntN(4), MaxAttempts: 1 + rng.IntN(3)}
			for range rng.IntN(3) / 2 {
				if len(tasks) > 0 {
					if d := tasks[rng.IntN(len(tasks))].ID; !strings.Contains(strings.Join(c.DependsOn, ","), d) {
						c.DependsOn = append(c.DependsOn, d)
					}
				}
			}
			if rng.IntN(15) == 0 {
				c.DependsOn = append(c.DependsOn, "task-missing")
			}
			c.Normalize(time.Unix(0, baseTS))
			tasks = append(tasks, c)
			add(api.OpTaskCreate, c)
		case k < 21:
			c := tasks[rng.IntN(len(tasks))]
			if rng.IntN(2) == 0 {
				c.Title += " (edited)"
			}
			add(api.OpTaskCreate, c)
		case k < 40:
			t := tasks[len(tasks)-1-rng.IntN(min(len(tasks), 8))]
			id, agent := t.ID, pick(agents)
			if rng.IntN(5) > 0 { // mostly an agent of the queue
				switch t.To {
				case "role:reviewer":
					agent = pick([]string{"rita", "rex"})
				case "capability:go":
					agent = pick([]string{"rita", "eve"})
				case "role:nobody":
				default:
					agent = t.To
				}
			}
			claims = append(claims, claim{id, agent, idx + 1})
			add(api.OpTaskClaim, api.TaskClaimCommand{ID: id, Agent: agent})
		case k < 52 && len(claims) > 0:
			c := claims[len(claims)-1-rng.IntN(min(len(claims), 2))]
			add(api.OpTaskProgress, api.TaskProgressCommand{ID: c.task, Agent: c.agent, Fence: c.fence, Message: "working", Progress: ptr(rng.Float64())})
		case k < 66 && len(claims) > 0:
			c := claims[len(claims)-1-rng.IntN(min(len(claims), 2))]
			status := api.TaskStatuses[rng.IntN(len(api.TaskStatuses))]
			comp := api.TaskCompletion{Status: status, Result: "result", ConfidenceScore: ptr(float64(rng.IntN(100)) / 100)}
			if status == api.TaskStatusFailure {
				comp.Error = &api.TaskError{ErrorType: "api_error", ErrorMessage: "upstream 503"}
			}
			add(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.task, Agent: c.agent, Fence: c.fence, Completion: comp})
			if status == api.TaskStatusRequiresApproval {
				var env Command
				env, _ = decode(logs[len(logs)-1].Data)
				key := "task-approval:" + c.task + ":1:" + itoa(c.fence)
				action, _ := json.Marshal(map[string]any{"task_id": c.task, "result": "result", "outputs": nil})
				creator := "boss"
				for _, t := range tasks {
					if t.ID == c.task {
						creator = t.From
					}
				}
				apprs = append(apprs, appr{"appr" + strings.TrimPrefix(api.DerivedID(c.agent, time.Unix(0, env.TS), key), "msg"), c.agent, []string{creator}, []string{hashOf(action)}})
			}
		case k < 71 && len(claims) > 0:
			c := claims[len(claims)-1-rng.IntN(min(len(claims), 2))]
			add(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.task, Agent: c.agent, Fence: c.fence, To: pick(append(agents, "role:reviewer")), Reason: "over to you"})
		case k < 76:
			t := tasks[rng.IntN(len(tasks))]
			from := t.From
			if rng.IntN(4) == 0 {
				from = "rex"
			}
			add(api.OpTaskCancel, api.TaskCancelCommand{ID: t.ID, From: from, Reason: "no longer needed"})
		case k < 92:
			add(api.OpTick, api.TickCommand{})
		case k < 95:
			prev := logs[6+rng.IntN(len(logs)-6)]
			idx++
			logs = append(logs, &raft.Log{Type: raft.LogCommand, Index: idx, Term: 1, Data: prev.Data})
		case k < 97:
			add(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(pick([]string{`""`, `"sam"`, `"role:supervisor"`}))})
		default:
			if rng.IntN(2) == 0 {
				add(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
					Forbidden:        []rules.ForbiddenRule{{From: "rex", To: "boss", Reason: "rex reports to ann"}},
					RerouteBlockedTo: "ann"}})
			} else {
				add(api.OpSetRules, api.SetRulesCommand{Clear: true})
			}
		}
	}
	return logs
}

// taskOutcome classifies a result of taskLog for the coverage check.
func taskOutcome(r any) string {
	switch v := r.(type) {
	case *api.TaskResult:
		return "state " + string(v.State)
	case *api.ApprovalResult:
		return "approval " + string(v.State)
	case *api.Approval:
		return "approval " + string(v.State)
	case *TickResult:
		switch {
		case len(v.Failed) > 0:
			return "tick failed"
		case len(v.Expired) > 0:
			return "tick expired"
		case len(v.ApprovalsEscalated) > 0:
			return "tick escalated"
		case len(v.ApprovalsExpired) > 0:
			return "tick approval expired"
		case v.Delivered != "":
			return "tick delivered"
		}
		return "tick idle"
	case error:
		for _, e := range []error{api.ErrConflict, api.ErrForbidden, api.ErrNotFound, api.ErrInvalid} {
			if isErr(v, e) {
				return "refused " + e.Error()
			}
		}
		return "error " + v.Error()
	case nil:
		return "nil"
	}
	return fmt.Sprintf("%T", r)
}

func TestTasksDeterministicAcrossBatchSplits(t *testing.T) {
	const n = 700
	logs := taskLog(t, 21, n)
	apply := func(sizes func() int) (*FSM, []string) {
		f, _ := openTemp(t)
		var out []string
		rest := logs
		for len(rest) > 0 {
			k := min(max(sizes(), 1), len(rest))
			for _, r := range f.ApplyBatch(rest[:k]) {
				out = append(out, renderResult(r))
			}
			rest = rest[k:]
		}
		return f, out
	}
	singles, resSingles := apply(func() int { return 1 })
	rng := rand.New(rand.NewPCG(5, 11))
	random, resRandom := apply(func() int { return 1 + rng.IntN(60) })
	whole, resWhole := apply(func() int { return n })

	// The log must reach every path, or equal dumps say little.
	seen := map[string]int{}
	f, _ := openTemp(t)
	for _, l := range logs {
		seen[taskOutcome(applyOne(f, l))]++
	}
	for _, want := range []string{"state ready", "state waiting", "state failed", "state running", "state succeeded", "state cancelled",
		"state awaiting_approval", "approval pending", "approval approved", "approval rejected", "approval cancelled",
		"tick expired", "tick failed", "tick delivered", "tick idle", "tick escalated", "tick approval expired", "refused " + api.ErrInvalid.Error(),
		"refused " + api.ErrConflict.Error(), "refused " + api.ErrForbidden.Error(), "refused " + api.ErrNotFound.Error()} {
		if seen[want] == 0 {
			t.Errorf("the task log never gives %q (outcomes: %v)", want, seen)
		}
	}
	for k := range seen {
		if strings.HasPrefix(k, "error ") {
			t.Errorf("unexpected outcome %q", k)
		}
	}

	for i := range resSingles {
		if resSingles[i] != resRandom[i] || resSingles[i] != resWhole[i] {
			t.Errorf("entry %d: results differ:\nsingles %s\nrandom  %s\nwhole   %s", i+1, resSingles[i], resRandom[i], resWhole[i])
		}
	}
	want := dump(t, singles)
	if dump(t, random) != want || dump(t, whole) != want {
		t.Errorf("Dump differs across batch splits")
	}
	if dump(t, f) != want {
		t.Errorf("Dump differs from single entries applied one by one")
	}
}

// A node restarted mid-log, and one restored from a snapshot, end with the
// state and the answers of a node that did neither: tasks and approvals.
func TestTasksSurviveRestartAndSnapshot(t *testing.T) {
	const n = 400
	logs := taskLog(t, 33, n)
	ref, _ := openTemp(t)
	applyChunks(ref, logs, func() int { return 1 })

	path := filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	applyChunks(f, logs[:250], func() int { return 25 })
	sink := takeSnapshot(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openAt(t, path)
	defer func() { _ = f.Close() }()
	for i, r := range f.ApplyBatch(logs[:250]) {
		if r != nil {
			t.Fatalf("replayed entry %d: %s, want nil", i+1, renderResult(r))
		}
	}
	applyChunks(f, logs[250:], func() int { return 13 })

	restored, _ := openTemp(t)
	if err := restored.Restore(sink.Reader()); err != nil {
		t.Fatal(err)
	}
	applyChunks(restored, logs[240:], func() int { return 40 })

	want := dump(t, ref)
	if dump(t, f) != want {
		t.Error("the restarted node's state differs")
	}
	if dump(t, restored) != want {
		t.Error("the restored node's state differs")
	}
	for name, g := range map[string]*FSM{"restarted": f, "restored": restored} {
		for _, id := range []string{"task-7", "task-50", "task-200"} {
			a, errA := ref.Task(id)
			b, errB := g.Task(id)
			if mustMarshal(a) != mustMarshal(b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
				t.Errorf("%s: Task(%s) differs", name, id)
			}
		}
		pa, _ := ref.TaskEvents(0, api.MaxPageLimit)
		pb, _ := g.TaskEvents(0, api.MaxPageLimit)
		if len(pa.Updates) == 0 || mustMarshal(pa) != mustMarshal(pb) {
			t.Errorf("%s: TaskEvents differ (%d updates in the reference)", name, len(pa.Updates))
		}
		ea, _ := ref.ApprovalEvents(0, api.MaxPageLimit)
		eb, _ := g.ApprovalEvents(0, api.MaxPageLimit)
		if len(ea.Updates) == 0 || mustMarshal(ea) != mustMarshal(eb) {
			t.Errorf("%s: ApprovalEvents differ (%d updates in the reference)", name, len(ea.Updates))
		}
		la, _ := ref.Approvals(api.ApprovalQuery{Limit: api.MaxPageLimit})
		if len(la.Approvals) == 0 {
			t.Fatal("the log opens no approval")
		}
		for _, ap := range la.Approvals {
			a, errA := ref.Approval(ap.ID)
			b, errB := g.Approval(ap.ID)
			if errA != nil || mustMarshal(a) != mustMarshal(b) || errB != nil {
				t.Errorf("%s: Approval(%s) differs (%v, %v)", name, ap.ID, errA, errB)
			}
		}
		for _, agent := range []string{"rita", "rex", "sam", "boss"} {
			pa, errA := ref.PendingApprovalsFor(agent)
			pb, errB := g.PendingApprovalsFor(agent)
			if pa != pb || errA != nil || errB != nil {
				t.Errorf("%s: PendingApprovalsFor(%s) = %d, want %d (%v, %v)", name, agent, pb, pa, errA, errB)
			}
		}
		da, okA := ref.NextDeadline()
		db, okB := g.NextDeadline()
		if !da.Equal(db) || okA != okB {
			t.Errorf("%s: NextDeadline %s %t, want %s %t", name, db, okB, da, okA)
		}
	}
}
