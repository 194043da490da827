package store

import (
	"factory"
)

// Key layout of artifacts.
const (
	artifactPrefix      = "art/"      // art/<artifact uid> → storedArtifact
	artifactBytesPrefix = "artbytes/" // artbytes/<artifact uid> → the bytes
	artifactRefPrefix   = "artref/"   // artref/<url> → the run that reported it last
)

type storedArtifact struct {
	RunID    string           `json:"run_id"`
	Artifact factory.Artifact `json:"artifact"`
}

// PutArtifact stores an artifact a run reported, with its bytes (if it has
// any), in the batch that adds it to the run; a pull request's or a
// reference's URL finds the run again.
func (b *Batch) PutArtifact(runID string, a factory.Artifact, data []byte) {
	if a.HasBytes() {
		b.putJSON(artifactPrefix+a.Data.UID, storedArtifact{RunID: runID, Artifact: a})
		b.putRaw(artifactBytesPrefix+a.Data.UID, data)
	}
	if a.Data.URL != "" {
		b.putRaw(artifactRefPrefix+a.Data.URL, []byte(runID))
	}
}

// Artifact reads an artifact with stored bytes, and the run it belongs to.
func (s *Store) Artifact(uid string) (runID string, a factory.Artifact, err error) {
	var st storedArtifact
	if err := s.getJSON(artifactPrefix+uid, &st); err != nil {
		return "", a, err
	}
	return st.RunID, st.Artifact, nil
}

// ArtifactBytes reads an artifact's bytes.
func (s *Store) ArtifactBytes(uid string) ([]byte, error) { return s.get(artifactBytesPrefix + uid) }

// RunByExternalReference is the run that last reported a pull request or
// reference with this URL.
func (s *Store) RunByExternalReference(url string) (string, error) {
	v, err := s.get(artifactRefPrefix + url)
	return string(v), err
}
