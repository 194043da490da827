package schema

import (
	"strconv"

	"factory"
)

const (
	maxFilterDepth = factory.FilterMaxDepth
	maxFilterKeys  = factory.FilterMaxKeys
)

func itoa(i int) string { return strconv.Itoa(i) }
