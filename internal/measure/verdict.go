package measure

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Verdict is a judge's answer: the label it chose and why.
type Verdict struct {
	Classification string `json:"classification"`
	Reason         string `json:"reason"`
}

// ErrNoVerdict is the error of a judge whose messages hold no answer.
var ErrNoVerdict = errors.New("the judge gave no verdict")

// maxVerdictScan bounds how much of a judge's messages is read for its
// answer: the end of them, where the answer is.
const maxVerdictScan = 256 << 10

// ParseVerdict reads a judge's answer from its messages (untrusted: an
// agent's output): the last JSON object in them that has a string
// "classification", which must be one of labels (compared ignoring case
// and surrounding space; the label as the scorer spells it is returned).
// The object may stand alone or inside other text and code fences.
func ParseVerdict(text string, labels []string) (Verdict, error) {
	if len(text) > maxVerdictScan {
		text = text[len(text)-maxVerdictScan:]
	}
	v, ok := lastVerdictObject(text)
	if !ok {
		return Verdict{}, ErrNoVerdict
	}
	got := strings.TrimSpace(v.Classification)
	for _, l := range labels {
		if strings.EqualFold(got, strings.TrimSpace(l)) {
			v.Classification = l
			return v, nil
		}
	}
	return Verdict{}, fmt.Errorf("the judge's classification %q is none of the scorer's labels (%s)", clip(got, 80), strings.Join(labels, ", "))
}

// maxVerdictCandidates bounds the objects tried, so that a message of
// many braces costs a bounded amount of work.
const maxVerdictCandidates = 64

// lastVerdictObject finds, from the end, the first '{' whose JSON object
// decodes with a classification.
func lastVerdictObject(text string) (Verdict, bool) {
	tried := 0
	for end := len(text); end > 0 && tried < maxVerdictCandidates; {
		i := strings.LastIndexByte(text[:end], '{')
		if i < 0 {
			break
		}
		end = i
		if !strings.Contains(text[i:min(len(text), i+4096)], "classification") {
			continue
		}
		tried++
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var raw map[string]json.RawMessage
		if dec.Decode(&raw) != nil {
			continue
		}
		var v Verdict
		if json.Unmarshal(raw["classification"], &v.Classification) != nil || v.Classification == "" {
			continue
		}
		_ = json.Unmarshal(raw["reason"], &v.Reason)
		return v, true
	}
	return Verdict{}, false
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
