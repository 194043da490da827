package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"strings"

	"factory"
)

// tokenPrefix starts every run token of the gateway, so that one is told
// from a provider's key at a glance (and by secret scanners).
const tokenPrefix = "fgw_"

// Tokens mints and checks the gateway's run tokens: the run's ID and a
// MAC of it under the server's key. A token stands for its run only; the
// gateway takes it while the run has a live turn (Runs.Admit).
type Tokens struct {
	Key []byte
}

// Mint is a run's token.
func (t *Tokens) Mint(runID string) string { return tokenPrefix + runID + "." + t.mac(runID) }

func (t *Tokens) mac(runID string) string {
	h := hmac.New(sha256.New, t.Key)
	h.Write([]byte("factory model gateway run token\x00" + runID))
	return factory.IDEncoding.EncodeToString(h.Sum(nil))
}

// Run is the run a token stands for, if the token is one of this
// server's (the MAC compared in constant time).
func (t *Tokens) Run(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 || len(t.Key) == 0 || len(token) > 256 {
		return "", false
	}
	id, mac := rest[:i], rest[i+1:]
	if !hmac.Equal([]byte(mac), []byte(t.mac(id))) {
		return "", false
	}
	return id, true
}
