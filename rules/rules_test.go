package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// decodeJSON decodes a document written as JSON, as the API does.
func decodeJSON(tb testing.TB, doc string) (*Document, error) {
	tb.Helper()
	return Decode([]byte(doc), JSON)
}

// mustRules decodes and compiles a JSON document.
func mustRules(tb testing.TB, doc string) *Compiled {
	tb.Helper()
	d, err := decodeJSON(tb, doc)
	if err != nil {
		tb.Fatalf("Decode: %v\n%s", err, doc)
	}
	r, err := Compile(d)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return r
}

type pairCase struct {
	name             string
	from, fromRole   string
	to, toRole       string
	allowed          bool
	reason           string // the whole reason, when refused
	reasonContaining string // or a part of it
}

func checkPairs(t *testing.T, r *Compiled, cases []pairCase) {
	t.Helper()
	for _, c := range cases {
		ok, reason := r.Allows(c.from, c.fromRole, c.to, c.toRole)
		if ok != c.allowed {
			t.Errorf("%s: Allows(%s/%s → %s/%s) = %t (%q), want %t", c.name, c.from, c.fromRole, c.to, c.toRole, ok, reason, c.allowed)
			continue
		}
		switch {
		case c.allowed && reason != "":
			t.Errorf("%s: allowed with a reason %q", c.name, reason)
		case !c.allowed && c.reason != "" && reason != c.reason:
			t.Errorf("%s: reason %q, want %q", c.name, reason, c.reason)
		case !c.allowed && c.reasonContaining != "" && !strings.Contains(reason, c.reasonContaining):
			t.Errorf("%s: reason %q, want it to contain %q", c.name, reason, c.reasonContaining)
		case !c.allowed && reason == "":
			t.Errorf("%s: refused without a reason", c.name)
		}
	}
}

const precedenceDoc = `{
  "agents": [
    {"agent": "*",             "can_send_to": ["role:lead"]},
    {"agent": "engineer_*",    "can_send_to": ["engineer_*", "role:lead"]},
    {"agent": "role:lead",     "can_send_to": ["*"]},
    {"agent": "engineer_boss", "can_send_to": "*"},
    {"agent": "role:qa",       "can_send_to": ["role:lead", "dev"]},
    {"agent": "qa1",           "can_receive_from": ["role:lead"]},
    {"agent": "secret",        "can_receive_from": []},
    {"agent": "eng?_x",        "can_send_to": ["dev"]}
  ],
  "forbidden": [
    {"from": "role:lead",  "to": "intern", "reason": "leads do not page interns"},
    {"from": "*",          "to": "vault",  "reason": "vault is read-only"},
    {"from": "engineer_?", "to": "lead2",  "reason": "first"},
    {"from": "engineer_1", "to": "lead2",  "reason": "second"},
    {"from": "dev",        "to": "role:qa"}
  ]
}`

func TestRulesPrecedence(t *testing.T) {
	r := mustRules(t, precedenceDoc)
	checkPairs(t, r, []pairCase{
		// Forbidden over allowed, whatever the specificity of the allow.
		{name: "forbidden over a role's *", from: "lead1", fromRole: "lead", to: "intern", toRole: "agent",
			reason: "leads do not page interns"},
		{name: "forbidden * over an id's *", from: "engineer_boss", fromRole: "agent", to: "vault", toRole: "lead",
			reason: "vault is read-only"},
		{name: "first forbidden entry in document order", from: "engineer_1", fromRole: "agent", to: "lead2", toRole: "lead",
			reason: "first"},
		{name: "forbidden without a reason", from: "dev", fromRole: "agent", to: "qa2", toRole: "qa",
			reason: "forbidden by forbidden[4]: dev → role:qa"},
		{name: "forbidden does not touch other pairs", from: "engineer_1", fromRole: "agent", to: "lead3", toRole: "lead", allowed: true},

		// An id over a glob.
		{name: "id over glob", from: "engineer_boss", fromRole: "agent", to: "dev", toRole: "agent", allowed: true},
		{name: "glob without the id entry", from: "engineer_2", fromRole: "agent", to: "dev", toRole: "agent",
			reason: "engineer_2 (role agent) may send only to engineer_*, role:lead (agents[1].can_send_to)"},
		// A glob over *.
		{name: "glob over *", from: "engineer_2", fromRole: "agent", to: "engineer_3", toRole: "agent", allowed: true},
		{name: "* alone", from: "bob", fromRole: "agent", to: "engineer_3", toRole: "agent",
			reason: "bob (role agent) may send only to role:lead (agents[0].can_send_to)"},
		{name: "* admits its list", from: "bob", fromRole: "agent", to: "lead1", toRole: "lead", allowed: true},
		// Two globs select the sender: either list admits.
		{name: "two globs, the second admits", from: "eng1_x", fromRole: "agent", to: "dev", toRole: "agent", allowed: true},
		{name: "two globs, neither admits", from: "engineer_x", fromRole: "agent", to: "bob", toRole: "agent",
			reasonContaining: "may send only to engineer_*, role:lead (agents[1].can_send_to)"},
		// A role over a glob and over *.
		{name: "role over glob", from: "engineer_7", fromRole: "lead", to: "dev", toRole: "agent", allowed: true},
		{name: "role over *", from: "qa2", fromRole: "qa", to: "dev", toRole: "agent", allowed: true},
		{name: "role list refuses", from: "qa2", fromRole: "qa", to: "engineer_2", toRole: "agent",
			reason: "qa2 (role qa) may send only to role:lead, dev (agents[4].can_send_to)"},
		// An id entry with only can_receive_from keeps its role's can_send_to.
		{name: "per-list specificity", from: "qa1", fromRole: "qa", to: "dev", toRole: "agent", allowed: true},
		{name: "per-list specificity refuses by role", from: "qa1", fromRole: "qa", to: "bob", toRole: "agent",
			reasonContaining: "(agents[4].can_send_to)"},
		// The recipient's list.
		{name: "recipient admits", from: "lead1", fromRole: "lead", to: "qa1", toRole: "qa", allowed: true},
		{name: "recipient refuses", from: "engineer_boss", fromRole: "agent", to: "qa1", toRole: "qa",
			reason: "qa1 (role qa) accepts messages only from role:lead (agents[5].can_receive_from)"},
		{name: "empty list admits nobody", from: "lead1", fromRole: "lead", to: "secret", toRole: "agent",
			reason: "secret (role agent) accepts messages only from nobody (agents[6].can_receive_from)"},
		// Unregistered agents have no role: role selectors never match them.
		{name: "unregistered sender under *", from: "ghost", fromRole: "", to: "lead1", toRole: "lead", allowed: true},
		{name: "unregistered recipient is no lead", from: "bob", fromRole: "agent", to: "ghost", toRole: "",
			reason: "bob (role agent) may send only to role:lead (agents[0].can_send_to)"},
	})
}

func TestRulesForbiddenOrderAcrossIndexes(t *testing.T) {
	// The id-indexed entry comes first in the document this time.
	r := mustRules(t, `{"forbidden": [
	  {"from": "engineer_1", "to": "lead2", "reason": "by id"},
	  {"from": "role:eng",   "to": "lead2", "reason": "by role"},
	  {"from": "*",          "to": "lead2", "reason": "by star"}],
	 "forbidden_interactions": [{"from": "x", "to": "y", "reason": "seed name"}]}`)
	checkPairs(t, r, []pairCase{
		{name: "id entry first", from: "engineer_1", fromRole: "eng", to: "lead2", reason: "by id"},
		{name: "role entry", from: "engineer_2", fromRole: "eng", to: "lead2", reason: "by role"},
		{name: "star entry", from: "other", fromRole: "", to: "lead2", reason: "by star"},
		{name: "forbidden_interactions count", from: "x", to: "y", reason: "seed name"},
		// Only forbidden entries: a denylist, the rest is allowed.
		{name: "denylist default", from: "x", to: "z", allowed: true},
	})
}

func TestRulesDefault(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      string // EffectiveDefault
		allowed   bool   // a → b, which no list mentions
	}{
		{"allow list", `{"agents": [{"agent": "c", "can_send_to": ["d"]}]}`, Deny, false},
		{"seed form", `{"allowed_interactions": {"c": {"can_send_to": ["d"]}}}`, Deny, false},
		{"allow list, default allow", `{"default": "allow", "agents": [{"agent": "c", "can_send_to": ["d"]}]}`, Allow, true},
		{"denylist", `{"forbidden": [{"from": "c", "to": "d"}]}`, Allow, true},
		{"denylist, default deny", `{"default": "deny", "forbidden": [{"from": "c", "to": "d"}]}`, Deny, false},
		{"empty document", `{}`, Allow, true},
		{"preset", `{"preset": "hierarchical", "default": "allow"}`, Allow, false}, // the preset governs every sender
	} {
		d, err := decodeJSON(t, c.doc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := d.EffectiveDefault(); got != c.want {
			t.Errorf("%s: EffectiveDefault = %s, want %s", c.name, got, c.want)
		}
		r, err := Compile(d)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ok, reason := r.Allows("a", "agent", "b", "agent")
		if ok != c.allowed {
			t.Errorf("%s: a → b allowed = %t (%q), want %t", c.name, ok, reason, c.allowed)
		}
		if !ok && c.want == Deny && reason != "no rule allows a → b, and the rules' default is deny" {
			t.Errorf("%s: reason %q", c.name, reason)
		}
	}
	var nilRules *Compiled
	if ok, reason := nilRules.Allows("a", "", "b", ""); !ok || reason != "" {
		t.Errorf("no document: Allows = %t %q, want true", ok, reason)
	}
	if got := (*Document)(nil).EffectiveDefault(); got != Allow {
		t.Errorf("no document: default %s", got)
	}
}

func TestRulesPresetHierarchical(t *testing.T) {
	r := mustRules(t, `{"preset": "hierarchical"}`)
	checkPairs(t, r, []pairCase{
		{name: "orchestrator to a worker", from: "boss", fromRole: "orchestrator", to: "w1", toRole: "agent", allowed: true},
		{name: "orchestrator to an unregistered agent", from: "boss", fromRole: "orchestrator", to: "ghost", allowed: true},
		{name: "worker to the orchestrator", from: "w1", fromRole: "engineer", to: "boss", toRole: "orchestrator", allowed: true},
		{name: "unregistered to the orchestrator", from: "ghost", to: "boss", toRole: "orchestrator", allowed: true},
		{name: "worker to a worker", from: "w1", fromRole: "engineer", to: "w2", toRole: "engineer",
			reason: "w1 (role engineer) may send only to role:orchestrator (preset hierarchical)"},
		{name: "worker to an unregistered agent", from: "w1", fromRole: "engineer", to: "ghost",
			reasonContaining: "may send only to role:orchestrator"},
	})

	r = mustRules(t, `{"preset": "hierarchical", "orchestrator_role": "lead"}`)
	checkPairs(t, r, []pairCase{
		{name: "custom role sends to all", from: "l", fromRole: "lead", to: "w", toRole: "agent", allowed: true},
		{name: "orchestrator role is just a worker now", from: "o", fromRole: "orchestrator", to: "w", toRole: "agent",
			reason: "o (role orchestrator) may send only to role:lead (preset hierarchical)"},
	})

	// Refined by a more specific entry, overridden by forbidden.
	r = mustRules(t, `{"preset": "hierarchical",
	  "agents": [{"agent": "role:reviewer", "can_send_to": ["role:orchestrator", "role:engineer"]}],
	  "forbidden": [{"from": "role:orchestrator", "to": "intern", "reason": "let them learn"}]}`)
	checkPairs(t, r, []pairCase{
		{name: "reviewer refined", from: "rv", fromRole: "reviewer", to: "e", toRole: "engineer", allowed: true},
		{name: "engineer still hierarchical", from: "e", fromRole: "engineer", to: "rv", toRole: "reviewer",
			reasonContaining: "preset hierarchical"},
		{name: "forbidden over the preset", from: "boss", fromRole: "orchestrator", to: "intern", toRole: "agent",
			reason: "let them learn"},
	})
}

// The seed file communication_rules.yaml, as JSON, and the same rules in
// the agents form decide every pair alike.
const seedRulesJSON = `{
  "allowed_interactions": {
    "master_agent":    {"can_send_to": ["*"], "can_receive_from": ["*"]},
    "developer_agent": {"can_send_to": ["master_agent", "reviewer_agent", "tester_agent"], "can_receive_from": ["master_agent", "reviewer_agent"]},
    "reviewer_agent":  {"can_send_to": ["master_agent", "developer_agent"], "can_receive_from": ["master_agent", "developer_agent"]},
    "tester_agent":    {"can_send_to": ["master_agent", "developer_agent"], "can_receive_from": ["master_agent", "developer_agent"]}
  },
  "forbidden_interactions": [
    {"from": "tester_agent", "to": "reviewer_agent", "reason": "Should go through developer first"}
  ]
}`

func TestRulesSeedFormAndAgentsFormAgree(t *testing.T) {
	seed := mustRules(t, seedRulesJSON)
	checkPairs(t, seed, []pairCase{
		{name: "example 2", from: "developer_agent", to: "reviewer_agent", allowed: true},
		{name: "example 3", from: "tester_agent", to: "reviewer_agent", reason: "Should go through developer first"},
		{name: "receive list", from: "developer_agent", to: "tester_agent", allowed: true},
		{name: "reviewer to tester", from: "reviewer_agent", to: "tester_agent",
			reason: "reviewer_agent may send only to master_agent, developer_agent (allowed_interactions.reviewer_agent.can_send_to)"},
	})
	list := mustRules(t, `{
	  "agents": [
	    {"agent": "tester_agent",    "can_send_to": ["master_agent", "developer_agent"], "can_receive_from": ["master_agent", "developer_agent"]},
	    {"agent": "master_agent",    "can_send_to": "*", "can_receive_from": "*"},
	    {"agent": "reviewer_agent",  "can_send_to": ["master_agent", "developer_agent"], "can_receive_from": ["master_agent", "developer_agent"]},
	    {"agent": "developer_agent", "can_send_to": ["master_agent", "reviewer_agent", "tester_agent"], "can_receive_from": ["master_agent", "reviewer_agent"]}
	  ],
	  "forbidden": [{"from": "tester_agent", "to": "reviewer_agent", "reason": "Should go through developer first"}]
	}`)
	names := []string{"master_agent", "developer_agent", "reviewer_agent", "tester_agent", "newbie"}
	for _, a := range names {
		for _, b := range names {
			ok1, _ := seed.Allows(a, "agent", b, "agent")
			ok2, _ := list.Allows(a, "agent", b, "agent")
			if ok1 != ok2 {
				t.Errorf("%s → %s: seed form %t, agents form %t", a, b, ok1, ok2)
			}
		}
	}
}

func TestRulesBadDocuments(t *testing.T) {
	long := strings.Repeat("a", MaxSelectorLen+1)
	many := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ",")
	}
	for _, c := range []struct {
		doc, field, reason string
	}{
		{`[]`, "rules", "want an object"},
		{`{"agnets": []}`, "agnets", "unknown field; known here: agents, allowed_interactions, default"},
		{`{"agents": {"x": 1}}`, "agents", "want a list"},
		{`{"agents": ["x"]}`, "agents[0]", "want an object"},
		{`{"agents": [{"agent": "a", "can_send_to": ["b"]}, {"agent": "c", "can_send_to": []},
		   {"agent": "d", "can_send_to": ["a["]}]}`, "agents[2].can_send_to[0]", `bad glob "a[": syntax error in pattern`},
		{`{"agents": [{"agent": "x", "can_send_to": ["Eng*"]}]}`, "agents[0].can_send_to[0]", `bad glob "Eng*": character "E"`},
		{`{"agents": [{"can_send_to": ["*"]}]}`, "agents[0].agent", "required"},
		{`{"agents": [{"agent": "x"}]}`, "agents[0]", "give can_send_to or can_receive_from"},
		{`{"agents": [{"agent": "x", "can_send_to": null}]}`, "agents[0]", "give can_send_to or can_receive_from"},
		{`{"agents": [{"agent": "x", "can_send_to": [1]}]}`, "agents[0].can_send_to[0]", "want a string, got a number (1)"},
		{`{"agents": [{"agent": "x", "can_send_to": {"a": 1}}]}`, "agents[0].can_send_to", "want a list, got an object"},
		{`{"agents": [{"agent": "x", "can_sendto": []}]}`, "agents[0].can_sendto", "unknown field; known here: agent, can_receive_from, can_send_to"},
		{`{"agents": [{"agent": "Bad Name", "can_send_to": []}]}`, "agents[0].agent", `"Bad Name" is not an agent id`},
		{`{"agents": [{"agent": "role:Bad", "can_send_to": []}]}`, "agents[0].agent", `role "Bad" must match`},
		{`{"agents": [{"agent": "x", "can_receive_from": [""]}]}`, "agents[0].can_receive_from[0]", "empty"},
		{`{"agents": [{"agent": "x", "can_receive_from": ["` + long + `"]}]}`, "agents[0].can_receive_from[0]", "129 bytes, at most 128"},
		{`{"agents": [{"agent": true, "can_send_to": []}]}`, "agents[0].agent", "want a string, got a boolean"},
		{`{"allowed_interactions": {"dev": {"can_send_to": ["x"], "agent": "y"}}}`, "allowed_interactions.dev.agent", "unknown field"},
		{`{"allowed_interactions": {"Bad Key": {"can_send_to": ["x"]}}}`, `allowed_interactions["Bad Key"]`, "is not an agent id"},
		{`{"allowed_interactions": {"dev": {"can_send_to": ["x["]}}}`, "allowed_interactions.dev.can_send_to[0]", "bad glob"},
		{`{"allowed_interactions": ["dev"]}`, "allowed_interactions", "want an object"},
		{`{"forbidden": [{"from": "a"}]}`, "forbidden[0].to", "empty"},
		{`{"forbidden": [{"from": "a", "to": "b", "reason": "two\nlines"}]}`, "forbidden[0].reason", "one line"},
		{`{"forbidden": [{"from": "a", "to": "b", "reason": "` + strings.Repeat("r", MaxReasonLen+1) + `"}]}`, "forbidden[0].reason", "1025 bytes, at most 1024"},
		{`{"forbidden": [{"from": "a", "to": "b"}], "forbidden_interactions": [{"from": "a", "to": "b", "why": "x"}]}`, "forbidden_interactions[0].why", "unknown field"},
		{`{"forbidden_interactions": [{"from": "a", "to": "b["}]}`, "forbidden_interactions[0].to", "bad glob"},
		{`{"preset": "flat"}`, "preset", `unknown preset "flat"; known: hierarchical`},
		{`{"preset": 1}`, "preset", "want a string"},
		{`{"orchestrator_role": "boss"}`, "orchestrator_role", "only with preset hierarchical"},
		{`{"preset": "hierarchical", "orchestrator_role": "Boss"}`, "orchestrator_role", "must match"},
		{`{"default": "maybe"}`, "default", `"maybe": want allow or deny`},
		{`{"agents": [` + many(MaxEntries+1, func(i int) string { return fmt.Sprintf(`{"agent": "a%d", "can_send_to": []}`, i) }) + `]}`,
			"agents", "1001 entries with allowed_interactions, at most 1000"},
		{`{"agents": [{"agent": "a", "can_send_to": [` + many(MaxSelectors+1, func(i int) string { return fmt.Sprintf(`"b%d"`, i) }) + `]}]}`,
			"agents[0].can_send_to", "1001 entries, at most 1000"},
		{`{"forbidden": [` + many(MaxEntries+1, func(i int) string { return fmt.Sprintf(`{"from": "a%d", "to": "b"}`, i) }) + `]}`,
			"forbidden", "1001 entries with forbidden_interactions, at most 1000"},
	} {
		_, err := decodeJSON(t, c.doc)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%.80s: err = %v, want a *FieldError", c.doc, err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%.80s: error %q, want field %s with %q", c.doc, err, c.field, c.reason)
		}
	}
}

// The compiled form is a function of the document only: compiled twice,
// from documents whose maps were written in another order, asked twice,
// the answers and reasons are the same.
func TestAllowsDeterministic(t *testing.T) {
	a := mustRules(t, precedenceDoc)
	b := mustRules(t, precedenceDoc)
	seedA := mustRules(t, seedRulesJSON)
	seedB := mustRules(t, `{
	  "forbidden_interactions": [{"from": "tester_agent", "to": "reviewer_agent", "reason": "Should go through developer first"}],
	  "allowed_interactions": {
	    "tester_agent":    {"can_receive_from": ["master_agent", "developer_agent"], "can_send_to": ["master_agent", "developer_agent"]},
	    "reviewer_agent":  {"can_receive_from": ["master_agent", "developer_agent"], "can_send_to": ["master_agent", "developer_agent"]},
	    "developer_agent": {"can_receive_from": ["master_agent", "reviewer_agent"], "can_send_to": ["master_agent", "reviewer_agent", "tester_agent"]},
	    "master_agent":    {"can_receive_from": ["*"], "can_send_to": ["*"]}
	  }}`)
	ids := []string{"lead1", "engineer_1", "engineer_boss", "eng1_x", "qa1", "qa2", "dev", "secret", "vault", "intern", "ghost",
		"master_agent", "developer_agent", "reviewer_agent", "tester_agent"}
	roles := []string{"", "agent", "lead", "qa"}
	n := 0
	for _, from := range ids {
		for _, fr := range roles {
			for _, to := range ids {
				for _, tr := range roles {
					for _, p := range [][2]*Compiled{{a, b}, {seedA, seedB}} {
						ok1, r1 := p[0].Allows(from, fr, to, tr)
						ok2, r2 := p[1].Allows(from, fr, to, tr)
						ok3, r3 := p[0].Allows(from, fr, to, tr)
						if ok1 != ok2 || r1 != r2 || ok1 != ok3 || r1 != r3 {
							t.Fatalf("%s/%s → %s/%s: %t %q, %t %q, %t %q", from, fr, to, tr, ok1, r1, ok2, r2, ok3, r3)
						}
						if !ok1 {
							n++
						}
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no pair was refused: the grid tests nothing")
	}
}

func TestAllowsDoesNotAllocate(t *testing.T) {
	r := mustRules(t, precedenceDoc)
	allocs := testing.AllocsPerRun(100, func() {
		r.Allows("engineer_2", "agent", "engineer_3", "agent")
		r.Allows("lead1", "lead", "qa1", "qa")
	})
	if allocs != 0 {
		t.Errorf("Allows allocates %.0f times per allowed pair, want 0", allocs)
	}
}
