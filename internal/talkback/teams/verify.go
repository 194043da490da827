package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultOpenIDMetadataURL is where the Bot Framework publishes the keys
// that sign its activities to bots.
const DefaultOpenIDMetadataURL = "https://login.botframework.com/v1/.well-known/openidconfiguration"

// Verifier checks the tokens of inbound activities against the Bot
// Framework's keys: read from the OpenID metadata's jwks_uri, kept for a
// day, read again at once for a kid it does not know (at most once a
// minute, so a flood of forged kids costs one fetch a minute).
type Verifier struct {
	MetadataURL string
	HTTP        *http.Client
	Now         func() time.Time

	mu      sync.Mutex
	keys    map[string]*Key
	fetched time.Time
	tried   time.Time
}

// How long keys are kept, and how often an unknown kid may make the
// verifier read them again.
const (
	keysFor      = 24 * time.Hour
	refetchEvery = time.Minute
	maxDocument  = 256 << 10
)

// Verify checks an activity's Authorization header: the bearer token must
// be the Bot Framework's for the bot appID, for the activity's service URL
// and channel. The error says why not, for the log; the caller answers 401.
func (v *Verifier) Verify(ctx context.Context, authorization, appID, serviceURL, channelID string) error {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || raw == "" {
		return ErrNoToken
	}
	tok, err := Parse(raw)
	if err != nil {
		return err
	}
	if tok.Alg != "RS256" {
		return fmt.Errorf("%w (alg %q)", ErrAlgorithm, tok.Alg)
	}
	keys, err := v.keysFor(ctx, tok.Kid)
	if err != nil {
		return err
	}
	return tok.Check(keys, appID, serviceURL, channelID, v.now())
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// keysFor returns the keys, read again when they are old or lack kid.
func (v *Verifier) keysFor(ctx context.Context, kid string) (map[string]*Key, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	stale := v.keys == nil || now.Sub(v.fetched) > keysFor
	unknown := v.keys != nil && v.keys[kid] == nil
	if stale || unknown && now.Sub(v.tried) > refetchEvery {
		v.tried = now
		keys, err := v.fetch(ctx)
		switch {
		case err != nil && v.keys == nil:
			return nil, fmt.Errorf("reading the Bot Framework's keys: %w", err)
		case err == nil:
			v.keys, v.fetched = keys, now
		}
	}
	return v.keys, nil
}

// fetch reads the metadata, then its key set.
func (v *Verifier) fetch(ctx context.Context) (map[string]*Key, error) {
	url := v.MetadataURL
	if url == "" {
		url = DefaultOpenIDMetadataURL
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	b, err := v.get(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.JWKSURI == "" {
		return nil, errors.New("the OpenID metadata names no jwks_uri")
	}
	if b, err = v.get(ctx, meta.JWKSURI); err != nil {
		return nil, err
	}
	return ParseKeys(b)
}

func (v *Verifier) get(ctx context.Context, url string) ([]byte, error) {
	hc := v.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err == nil && len(b) > maxDocument {
		err = fmt.Errorf("GET %s: over %d bytes", url, maxDocument)
	}
	return b, err
}
