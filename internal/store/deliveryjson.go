package store

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"factory"
)

// appendDelivery appends d encoded exactly as encoding/json encodes it
// (the same bytes: TestDeliveryEncodingMatchesJSON). Every accepted
// delivery writes its record, and reflection was a tenth of ingress's
// time per request; records are still read with encoding/json.
func appendDelivery(b []byte, d *factory.Delivery) []byte {
	b = append(b, `{"delivery_id":`...)
	b = appendString(b, d.ID)
	b = append(b, `,"webhook_uid":`...)
	b = appendString(b, d.WebhookUID)
	b = append(b, `,"label":`...)
	b = appendString(b, d.Label)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, d.Size, 10)
	b = append(b, `,"time":"`...)
	b = d.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if d.IdentitySource != "" {
		b = append(b, `,"identity_source":`...)
		b = appendString(b, d.IdentitySource)
	}
	if d.Identity != "" {
		b = append(b, `,"identity":`...)
		b = appendString(b, d.Identity)
	}
	b = append(b, `,"client_addr":`...)
	b = appendString(b, d.ClientAddr)
	if d.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, d.Reason)
	}
	if d.DuplicateOf != "" {
		b = append(b, `,"duplicate_of":`...)
		b = appendString(b, d.DuplicateOf)
	}
	if d.RedeliveryOf != "" {
		b = append(b, `,"redelivery_of":`...)
		b = appendString(b, d.RedeliveryOf)
	}
	b = append(b, `,"run_ids":`...)
	if d.RunIDs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, id := range d.RunIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, id)
		}
		b = append(b, ']')
	}
	if d.EventType != "" {
		b = append(b, `,"event_type":`...)
		b = appendString(b, d.EventType)
	}
	if d.Event != nil {
		// Written when a delivery is evaluated, not on the ingress path.
		ev, _ := json.Marshal(d.Event)
		b = append(b, `,"event":`...)
		b = append(b, ev...)
	}
	if d.Outcome != "" {
		b = append(b, `,"outcome":`...)
		b = appendString(b, d.Outcome)
	}
	if d.TraceID != "" {
		b = append(b, `,"trace_id":`...)
		b = appendString(b, d.TraceID)
	}
	if d.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendString(b, d.Traceparent)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does by default: HTML-safe, with
// invalid UTF-8 replaced by U+FFFD and U+2028/U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
