package a2ahost

import (
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/maos-project/maos/api"
)

// BearerScheme is the name of the card's one security scheme: maos bearer
// tokens (Authorization: Bearer <secret>, as for the HTTP API).
const BearerScheme a2a.SecuritySchemeName = "maosBearer"

// Card is the A2A Agent Card of a registered maos agent, served at
// CardPath(id) and naming url (AgentPath(id) on this node) as its A2A
// 1.0 JSON-RPC interface, then url+"/v0.3" (V03Path) as its A2A 0.3 one. Its description is the agent's (or its role), each
// capability is a skill (tag: the capability) and its role is one more
// skill ("role:<role>"), matching how maos addresses tasks (to an agent,
// "role:NAME" or "capability:NAME"). Input: text and JSON data; output:
// text and JSON data. Streaming (SendStreamingMessage, SubscribeToTask);
// push notifications false (the card handler sets them when the node has
// an allowlist, Options.PushAllow).
func Card(ag api.Agent, url, version string) *a2a.AgentCard {
	desc := ag.Description
	if desc == "" {
		desc = "maos agent " + ag.ID + " (role " + ag.Role + ")"
	}
	skills := []a2a.AgentSkill{{
		ID: "role:" + ag.Role, Name: ag.Role, Tags: []string{"role", ag.Role},
		Description: "Tasks for the role " + ag.Role + ": the message's text is the task's title and description, its data parts the task's context.",
	}}
	for _, c := range ag.Capabilities {
		skills = append(skills, a2a.AgentSkill{
			ID: "capability:" + c, Name: c, Tags: []string{"capability", c},
			Description: "Tasks that need the capability " + c + ".",
		})
	}
	return &a2a.AgentCard{
		Name:        ag.ID,
		Description: desc,
		Version:     version,
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC),
			{URL: url + "/v0.3", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
		SecuritySchemes: a2a.NamedSecuritySchemes{BearerScheme: a2a.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "a maos token (maosctl token create); without --auth on the node any value is accepted",
		}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{BearerScheme: a2a.SecuritySchemeScopes{}}},
	}
}
