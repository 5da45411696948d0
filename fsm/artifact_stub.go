package fsm

import "time"

// Stand-ins for the artifact queries until the state machine stores
// artifacts (issue 17; replaced by artifact_query.go).

// Artifact returns the record of artifact id; a *NotFoundError when none
// is stored.
func (f *FSM) Artifact(id string) (*Artifact, error) { return nil, notFound("artifact %s", id) }

// Artifacts returns a page of artifact records in index order.
func (f *FSM) Artifacts(q ArtifactQuery) (ArtifactPage, error) {
	return ArtifactPage{Artifacts: []*Artifact{}}, nil
}

// ArtifactUsage returns the bytes of the artifacts agent uploaded first
// and its quota (0: none).
func (f *FSM) ArtifactUsage(agent string) (used, quota int64, err error) { return 0, 0, nil }

// ArtifactsDue returns up to limit ids of artifacts no message or task
// references whose retention has passed at now (stand-in: none).
func (f *FSM) ArtifactsDue(now time.Time, limit int) ([]string, error) { return nil, nil }
