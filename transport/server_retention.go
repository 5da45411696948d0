package transport

import (
	"net/http"

	"github.com/maos-project/maos/api"
)

func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) {
	ch := r.PathValue("channel")
	s.query(w, r, func(st Reader) (any, error) { return st.RetentionOf(ch) })
}

// setRetention sets a channel's policy, body {"max_age":"720h","max_messages":N},
// and answers what the immediate trim removed (api.TrimResult).
func (s *Server) setRetention(w http.ResponseWriter, r *http.Request) {
	var cmd api.SetRetentionCommand
	if err := decodeBody(w, r, maxControlBytes, &cmd); err != nil {
		s.writeError(w, r, err)
		return
	}
	if cmd.Channel != "" && cmd.Channel != r.PathValue("channel") {
		s.writeError(w, r, &api.FieldError{Field: "channel", Reason: "differs from the channel in the path"})
		return
	}
	cmd.Channel = r.PathValue("channel")
	if _, err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpSetRetention, cmd)
}

// trimChannel applies a channel's policy now (the leader also does it
// periodically).
func (s *Server) trimChannel(w http.ResponseWriter, r *http.Request) {
	cmd := api.TrimCommand{Channel: r.PathValue("channel")}
	if !api.ValidName(cmd.Channel) {
		s.writeError(w, r, api.NameError("channel", cmd.Channel))
		return
	}
	s.propose(w, r, api.OpTrim, cmd)
}
