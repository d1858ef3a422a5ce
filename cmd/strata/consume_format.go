package main

// Record output of `strata consume`: kcat-style -f formats and -o json.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// jsonRecord is the -o json shape of one record. Keys, values and header
// values that are not valid UTF-8 are base64 (standard, padded), marked by
// key_encoding / value_encoding / header_encodings, so no byte is lost
// (JSON strings cannot hold them: encoding/json would print U+FFFD).
type jsonRecord struct {
	Topic           string            `json:"topic"`
	Partition       int32             `json:"partition"`
	Offset          int64             `json:"offset"`
	Timestamp       int64             `json:"timestamp"`
	Key             *string           `json:"key"`
	KeyEncoding     string            `json:"key_encoding,omitempty"`
	Value           *string           `json:"value"`
	ValueEncoding   string            `json:"value_encoding,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	HeaderEncodings map[string]string `json:"header_encodings,omitempty"`
}

// encodeBytes returns b as a JSON-safe string and its encoding marker
// ("" for UTF-8 text, "base64" otherwise); nil stays nil.
func encodeBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}

// recordPrinter prints records in a kcat-style format or as JSON lines.
type recordPrinter struct {
	format string
	json   bool
	time   string // %T: ms, rfc3339 or local
}

// print writes one record.
func (p recordPrinter) print(w io.Writer, r *kgo.Record) error {
	if p.json {
		jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
		jr.Key, jr.KeyEncoding = encodeBytes(r.Key)
		jr.Value, jr.ValueEncoding = encodeBytes(r.Value)
		if len(r.Headers) > 0 {
			jr.Headers = map[string]string{}
			for _, h := range r.Headers {
				v, enc := encodeBytes(h.Value)
				if v == nil {
					v = new(string)
				}
				jr.Headers[h.Key] = *v
				if enc != "" {
					if jr.HeaderEncodings == nil {
						jr.HeaderEncodings = map[string]string{}
					}
					jr.HeaderEncodings[h.Key] = enc
				}
			}
		}
		b, err := json.Marshal(jr)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(w, p.formatRecord(r))
	return err
}

// timestamp prints a record time for %T.
func (p recordPrinter) timestamp(t time.Time) string {
	switch p.time {
	case "rfc3339":
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	case "local":
		return t.Local().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// formatRecord expands kcat-style tokens.
func (p recordPrinter) formatRecord(r *kgo.Record) string {
	format := p.format
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if (ch != '%' && ch != '\\') || i+1 == len(format) {
			sb.WriteByte(ch)
			continue
		}
		i++
		if ch == '\\' {
			switch format[i] {
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			case 'r':
				sb.WriteByte('\r')
			default:
				sb.WriteByte(format[i])
			}
			continue
		}
		switch format[i] {
		case 't':
			sb.WriteString(r.Topic)
		case 'p':
			sb.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			sb.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			sb.Write(r.Key)
		case 's':
			sb.Write(r.Value)
		case 'K':
			sb.WriteString(strconv.Itoa(lenOrMinus(r.Key)))
		case 'S':
			sb.WriteString(strconv.Itoa(lenOrMinus(r.Value)))
		case 'T':
			sb.WriteString(p.timestamp(r.Timestamp))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(h.Key)
				sb.WriteByte('=')
				sb.Write(h.Value)
			}
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}

// lenOrMinus is len(b), or -1 for null (as kcat prints it).
func lenOrMinus(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
