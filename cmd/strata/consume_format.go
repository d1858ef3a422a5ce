package main

// Record output of `strata consume`: kcat-style -f formats and -o json.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// jsonRecord is the -o json shape of one record.
type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// printRecord writes one record in the kcat-style format or as JSON.
func printRecord(w io.Writer, r *kgo.Record, format string, asJSON bool) error {
	if asJSON {
		jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
		if r.Key != nil {
			k := string(r.Key)
			jr.Key = &k
		}
		if r.Value != nil {
			v := string(r.Value)
			jr.Value = &v
		}
		if len(r.Headers) > 0 {
			jr.Headers = map[string]string{}
			for _, h := range r.Headers {
				jr.Headers[h.Key] = string(h.Value)
			}
		}
		b, err := json.Marshal(jr)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(w, formatRecord(r, format))
	return err
}

// formatRecord expands kcat-style tokens.
func formatRecord(r *kgo.Record, format string) string {
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
			sb.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
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
