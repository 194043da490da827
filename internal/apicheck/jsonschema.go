package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Schema is a published JSON Schema (Atlassian's ADF, a Swagger 2.0
// description's definitions), compiled: its draft is the one it declares.
type Schema struct {
	s *jsonschema.Schema
}

// LoadSchema compiles the schema a document holds, at a JSON pointer of it
// ("" for the document's root).
func LoadSchema(r io.Reader, name, pointer string) (*Schema, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem://" + name
	if err := c.AddResource(url, bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if pointer != "" {
		url += "#" + pointer
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Schema{s: s}, nil
}

// Validate checks a JSON document.
func (s *Schema) Validate(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.ValidateValue(v)
}

// ValidateValue checks a decoded value (numbers as json.Number).
func (s *Schema) ValidateValue(v any) error { return s.s.Validate(v) }
