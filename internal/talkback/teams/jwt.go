package teams

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Issuer is the issuer of the tokens the Bot Framework signs activities
// to a bot with.
const Issuer = "https://api.botframework.com"

// Skew is the clock difference a token's times are allowed (the Bot
// Framework's own SDKs allow five minutes).
const Skew = 5 * time.Minute

// maxToken bounds a token's length, before anything of it is decoded.
const maxToken = 16 << 10

// Verification failures: each answers 401.
var (
	ErrNoToken   = errors.New("no Authorization: Bearer token")
	ErrMalformed = errors.New("the token is not a JSON Web Token")
	ErrAlgorithm = errors.New("the token is not signed with RS256")
	ErrKey       = errors.New("the token's signing key is not one of the Bot Framework's")
	ErrSignature = errors.New("the token's signature does not verify")
	ErrClaims    = errors.New("the token's claims do not match")
	ErrExpired   = errors.New("the token has expired or is not valid yet")
)

// Token is a JSON Web Token's parts: its header's algorithm and key ID,
// its claims, and what the signature signs.
type Token struct {
	Alg, Kid string
	Claims   Claims
	signed   []byte
	sig      []byte
}

// Claims are what a Bot Framework token says: who signed it for whom,
// when it is valid, and the channel's service URL it speaks for.
type Claims struct {
	Iss string   `json:"iss"`
	Aud Audience `json:"aud"`
	Exp int64    `json:"exp"`
	Nbf int64    `json:"nbf"`
	// ServiceURL is the serviceurl claim (serviceUrl in older tokens).
	ServiceURL    string `json:"serviceurl"`
	ServiceURLOld string `json:"serviceUrl"`
}

// Audience is a JWT's aud: one string, or a list of them.
type Audience []string

// UnmarshalJSON reads either form.
func (a *Audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// Parse reads a compact JWS without trusting it: three base64url parts,
// a JSON header and claims. Nothing is verified.
func Parse(s string) (*Token, error) {
	if len(s) > maxToken {
		return nil, fmt.Errorf("%w: over %d bytes", ErrMalformed, maxToken)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, ErrMalformed
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	t := &Token{signed: []byte(parts[0] + "." + parts[1]), sig: sig}
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if err := json.Unmarshal(cb, &t.Claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	t.Alg, t.Kid = h.Alg, h.Kid
	return t, nil
}

// Check verifies a token as the Bot Framework's activities to a bot carry
// it: RS256 with one of keys (by its kid, endorsed for the activity's
// channel when the key lists endorsements), issued by the Bot Framework
// for the bot (aud appID), valid at now (Skew either way), for the
// activity's service URL.
func (t *Token) Check(keys map[string]*Key, appID, serviceURL, channelID string, now time.Time) error {
	if t.Alg != "RS256" {
		return fmt.Errorf("%w (alg %q)", ErrAlgorithm, t.Alg)
	}
	k := keys[t.Kid]
	if k == nil {
		return fmt.Errorf("%w (kid %q)", ErrKey, t.Kid)
	}
	if len(k.Endorsements) > 0 && channelID != "" && !slices.Contains(k.Endorsements, channelID) {
		return fmt.Errorf("%w: the key is not endorsed for channel %s", ErrKey, channelID)
	}
	sum := sha256.Sum256(t.signed)
	if rsa.VerifyPKCS1v15(k.Public, crypto.SHA256, sum[:], t.sig) != nil {
		return ErrSignature
	}
	c := t.Claims
	switch {
	case c.Iss != Issuer:
		return fmt.Errorf("%w: issuer %q", ErrClaims, c.Iss)
	case appID == "" || !slices.Contains(c.Aud, appID):
		return fmt.Errorf("%w: audience %q is not the bot's app ID", ErrClaims, []string(c.Aud))
	case c.Exp == 0 || now.After(time.Unix(c.Exp, 0).Add(Skew)):
		return ErrExpired
	case c.Nbf != 0 && now.Add(Skew).Before(time.Unix(c.Nbf, 0)):
		return ErrExpired
	}
	claimed := c.ServiceURL
	if claimed == "" {
		claimed = c.ServiceURLOld
	}
	if claimed == "" || !sameServiceURL(claimed, serviceURL) {
		return fmt.Errorf("%w: the token speaks for service URL %q, the activity for %q", ErrClaims, claimed, serviceURL)
	}
	return nil
}

func sameServiceURL(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// Key is a signing key of the Bot Framework's: an RSA public key and the
// channels it is endorsed for.
type Key struct {
	Public       *rsa.PublicKey
	Endorsements []string
}

// ParseKeys reads a JSON Web Key Set: its RSA keys by kid (others are
// left out).
func ParseKeys(b []byte) (map[string]*Key, error) {
	var set struct {
		Keys []struct {
			Kty          string   `json:"kty"`
			Kid          string   `json:"kid"`
			N            string   `json:"n"`
			E            string   `json:"e"`
			Use          string   `json:"use"`
			Endorsements []string `json:"endorsements"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("the key set: %w", err)
	}
	out := map[string]*Key{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || k.Kid == "" || k.Use != "" && k.Use != "sig" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(n) < 256 || len(e) == 0 || len(e) > 4 {
			continue // not a usable key of at least 2048 bits
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 || exp%2 == 0 {
			continue
		}
		out[k.Kid] = &Key{Public: &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, Endorsements: k.Endorsements}
	}
	return out, nil
}
