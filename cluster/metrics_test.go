package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/metrics"
)

// scrapeStatus GETs n's /metrics with token ("" for none) and returns the
// status and, on 200, the parsed families.
func scrapeStatus(t *testing.T, n *clustertest.Node, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequestWithContext(clustertest.Context(t), http.MethodGet, "http://"+n.Addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", n.Addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	fams, err := metrics.Parse(resp.Body)
	if err != nil {
		t.Fatalf("node %s: %v", n.ID(), err)
	}
	return resp.StatusCode, fams
}

// scrape is scrapeStatus with the admin token, which must answer 200.
func scrape(t *testing.T, n *clustertest.Node) map[string]*dto.MetricFamily {
	t.Helper()
	code, fams := scrapeStatus(t, n, testAdminToken)
	if code != http.StatusOK {
		t.Fatalf("GET %s/metrics as admin: %d", n.ID(), code)
	}
	return fams
}

// metricValue is one sample of n's metrics; the test fails if it is absent.
func metricValue(t *testing.T, n *clustertest.Node, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := metrics.Value(scrape(t, n), name, labels)
	if !ok {
		t.Fatalf("node %s: no %s%v", n.ID(), name, labels)
	}
	return v
}

// TestMetricsOfAThreeNodeCluster scrapes GET /metrics of every node of a
// real cluster (with auth) and holds what it says to the cluster's state:
// Raft's roles and term, the applied index, the sends counted, tasks by
// state, and who may scrape.
func TestMetricsOfAThreeNodeCluster(t *testing.T) {
	c := newAuthCluster(t, 3)
	leader := c.Leader()
	ctx := clustertest.Context(t)

	t.Run("raft state and term", func(t *testing.T) {
		// Polled as a whole: under load an election may move the lead
		// between scrapes.
		clustertest.WaitFor(t, 15*time.Second, "one node's maos_raft_state to say leader, the others' follower, each term its status's", func() bool {
			leaders := 0
			for _, n := range c.Nodes {
				fams := scrape(t, n)
				st, err := n.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := "follower"
				if st.State == "leader" {
					want = "leader"
					leaders++
				}
				for _, s := range metrics.RaftStates {
					v, _ := metrics.Value(fams, "maos_raft_state", map[string]string{"state": s})
					if (s == want) != (v == 1) {
						return false
					}
				}
				term, _ := metrics.Value(fams, "maos_raft_term", nil)
				voters, _ := metrics.Value(fams, "maos_raft_voters", nil)
				if term != float64(st.Term) || voters != 3 {
					return false
				}
				// A cluster of this build runs its version (version.go).
				built, _ := metrics.Value(fams, "maos_state_version", nil)
				runs, _ := metrics.Value(fams, "maos_cluster_state_version", nil)
				if built != float64(fsm.MaxStateVersion) || runs != float64(fsm.MaxStateVersion) {
					return false
				}
			}
			return leaders == 1
		})
	})

	t.Run("sends and applied index", func(t *testing.T) {
		f := c.Follower()
		ok := map[string]string{"result": metrics.SendOK}
		sendsBefore := metricValue(t, f, "maos_sends_total", ok)
		fwdBefore := metricValue(t, f, "maos_forwarded_writes_total", ok)
		const n = 5
		for i := range n {
			if _, err := f.Client.Send(ctx, clustertest.Msg("alice", "general", fmt.Sprintf("metrics %d", i))); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if got := metricValue(t, f, "maos_sends_total", ok) - sendsBefore; got != n {
			t.Errorf("maos_sends_total{result=ok} on %s rose by %v after %d sends, want %d", f.ID(), got, n, n)
		}
		if got := metricValue(t, f, "maos_forwarded_writes_total", ok) - fwdBefore; got < n {
			t.Errorf("maos_forwarded_writes_total{result=ok} on follower %s rose by %v after %d sends, want at least %d", f.ID(), got, n, n)
		}
		// A refused send is counted by its error code.
		_, err := f.Client.Send(ctx, clustertest.Msg("alice", "general", ""))
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("an empty message: %v, want an API error", err)
		}
		if v, _ := metrics.Value(scrape(t, f), "maos_sends_total", map[string]string{"result": apiErr.Code}); v != 1 {
			t.Errorf("maos_sends_total{result=%q} = %v after one refused send, want 1", apiErr.Code, v)
		}
		for _, node := range c.Nodes {
			st, err := node.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fams := scrape(t, node)
			applied, _ := metrics.Value(fams, "maos_state_applied_index", nil)
			if applied < float64(st.AppliedIndex) {
				t.Errorf("node %s: maos_state_applied_index %v < status applied_index %d", node.ID(), applied, st.AppliedIndex)
			}
			raftApplied, _ := metrics.Value(fams, "maos_raft_applied_index", nil)
			commit, _ := metrics.Value(fams, "maos_raft_commit_index", nil)
			if raftApplied < applied || commit < applied {
				t.Errorf("node %s: raft applied %v, commit %v below the state's applied %v", node.ID(), raftApplied, commit, applied)
			}
		}
		// Commits are timed by the leader that proposed them (an election
		// under load may have moved the lead meanwhile).
		commits := 0.0
		for _, node := range c.Nodes {
			commits += metricValue(t, node, "maos_state_commit_seconds", nil)
		}
		if commits < n {
			t.Errorf("the nodes' maos_state_commit_seconds counted %v commits in all, want at least %d", commits, n)
		}
		if v := metricValue(t, f, "maos_apply_batch_entries", nil); v < 1 {
			t.Errorf("follower's maos_apply_batch_entries counted %v batches", v)
		}
	})

	t.Run("strong reads", func(t *testing.T) {
		f := c.Follower()
		before := metricValue(t, f, "maos_strong_reads_total", nil)
		if _, err := f.Client.Channels(ctx, api.Strong); err != nil {
			t.Fatal(err)
		}
		if got := metricValue(t, f, "maos_strong_reads_total", nil) - before; got != 1 {
			t.Errorf("maos_strong_reads_total rose by %v after one strong read, want 1", got)
		}
	})

	t.Run("tasks by state", func(t *testing.T) {
		if _, err := leader.Client.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "rita", Role: "agent"}); err != nil {
			t.Fatal(err) // whom the tasks are for
		}
		for i, cmd := range []api.TaskCreateCommand{
			{ID: "t-m1", From: "lead", To: "rita", Title: "first"},
			{ID: "t-m2", From: "lead", To: "rita", Title: "second"},
			{ID: "t-m3", From: "lead", To: "rita", Title: "after the first", DependsOn: []string{"t-m1"}},
		} {
			if _, err := leader.Client.CreateTask(ctx, cmd); err != nil {
				t.Fatalf("create task %d: %v", i, err)
			}
		}
		for _, n := range c.Nodes {
			clustertest.WaitFor(t, 10*time.Second, n.ID()+"'s maos_tasks to match its state", func() bool {
				fams := scrape(t, n)
				for _, st := range api.TaskStates {
					page, err := n.FSM().Tasks(api.TaskQuery{State: st, Limit: api.MaxPageLimit})
					if err != nil {
						t.Fatal(err)
					}
					if v, ok := metrics.Value(fams, "maos_tasks", map[string]string{"state": string(st)}); !ok || v != float64(len(page.Tasks)) {
						return false
					}
				}
				ready, _ := metrics.Value(fams, "maos_tasks", map[string]string{"state": string(api.TaskReady)})
				waiting, _ := metrics.Value(fams, "maos_tasks", map[string]string{"state": string(api.TaskWaiting)})
				return ready == 2 && waiting == 1
			})
		}
	})

	t.Run("auth", func(t *testing.T) {
		tok, err := leader.Client.CreateToken(ctx, "bob", string(api.RoleAgent))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			if code, _ := scrapeStatus(t, n, ""); code != http.StatusUnauthorized {
				t.Errorf("node %s: GET /metrics without a token = %d, want 401", n.ID(), code)
			}
			clustertest.WaitFor(t, 5*time.Second, n.ID()+" to refuse an agent's token with 403", func() bool {
				code, _ := scrapeStatus(t, n, tok.Token)
				return code == http.StatusForbidden
			})
			if code, _ := scrapeStatus(t, n, testAdminToken); code != http.StatusOK {
				t.Errorf("node %s: GET /metrics as admin = %d, want 200", n.ID(), code)
			}
		}
	})
}
