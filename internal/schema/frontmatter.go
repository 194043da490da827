package schema

import (
	"bytes"
	"errors"
)

// ErrNoFrontMatter says an automation file does not start with a "---" line.
var ErrNoFrontMatter = errors.New(`an automation file starts with a "---" line, then YAML front matter, then "---" and the prompt`)

// ErrUnclosedFrontMatter says the closing "---" line is missing.
var ErrUnclosedFrontMatter = errors.New(`front matter is not closed: add a "---" line between the YAML and the prompt`)

// SplitFrontMatter separates an automation file into its YAML front matter
// and its body (the prompt). frontLine is the line of the file on which the
// YAML starts, so that positions inside it can be reported against the file;
// bodyLine is where the body starts.
//
// It is written by hand rather than with a front-matter library so that the
// line offset is exact and nothing is guessed: the first line must be "---",
// and the YAML ends at the next line that is exactly "---".
func SplitFrontMatter(data []byte) (front []byte, frontLine int, body []byte, bodyLine int, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first, rest, ok := cutLine(data)
	if !isFence(first) {
		return nil, 0, nil, 0, ErrNoFrontMatter
	}
	line := 2
	start := len(data) - len(rest)
	for pos := start; ok || len(rest) > 0; {
		var l []byte
		l, rest, ok = cutLine(rest)
		if isFence(l) {
			return data[start:pos], 2, rest, line + 1, nil
		}
		pos = len(data) - len(rest)
		line++
		if !ok {
			break
		}
	}
	return nil, 0, nil, 0, ErrUnclosedFrontMatter
}

func cutLine(b []byte) (line, rest []byte, found bool) {
	line, rest, found = bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), rest, found
}

func isFence(l []byte) bool {
	return string(bytes.TrimRight(l, " \t")) == "---"
}
