package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// kcatClient drives the kcat binary (librdkafka). kcat has no admin API:
// topics are created by the suite with franz-go.
func kcatClient(t *testing.T) *Client {
	path := requireTool(t, "kcat", "-V")
	out, _ := exec.Command(path, "-V").CombinedOutput()
	versions := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		if f == "Version" {
			continue
		}
		if versions["kcat"] == "" && len(f) > 0 && f[0] >= '0' && f[0] <= '9' && strings.Contains(f, ".") {
			versions["kcat"] = f
		}
	}
	if i := strings.Index(string(out), "librdkafka "); i >= 0 {
		versions["librdkafka"] = strings.Fields(string(out)[i+len("librdkafka "):])[0]
	}
	return &Client{
		Name:       "kcat",
		Supports:   set(opProduce, opFetch, opOffsetForTime, opWatermarks, opIdempotent, opLogAppendTime, opNullRecord, opIsolation, opGroupConsume),
		Codecs:     []string{"none", "gzip", "snappy", "lz4", "zstd"},
		Versions:   versions,
		Librdkafka: true,
		do:         func(ctx context.Context, op Op) Result { return kcatDo(ctx, path, op) },
	}
}

// librdkafkaErrors maps librdkafka's broker error descriptions to Kafka codes.
var librdkafkaErrors = map[string]int16{
	"Broker: Broker failed to validate record":                         codeInvalidRecord,
	"Broker: Unknown topic or partition":                               codeUnknownTopic,
	"Broker: Invalid message":                                          2,
	"Broker: Message size too large":                                   10,
	"Broker: Message batch larger than configured server segment size": codeBatchTooLarge,
	"Broker: Invalid configuration":                                    codeInvalidConfig,
	"Local: Unknown partition":                                         codeUnknownTopic,
	"Local: Unknown topic":                                             codeUnknownTopic,
}

func kcatRun(ctx context.Context, path string, stdin []byte, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func kcatFail(args []string, stderr string, err error) Result {
	code := int16(-1)
	for msg, c := range librdkafkaErrors {
		if strings.Contains(stderr, msg) {
			code = c
			break
		}
	}
	return Result{ErrorCode: code, Error: fmt.Sprintf("kcat %s: %v: %s", strings.Join(args, " "), err, tail(stderr))}
}

func kcatDo(ctx context.Context, path string, op Op) (res Result) {
	part := strconv.Itoa(int(op.Partition))
	switch op.Op {
	case opGroupConsume:
		return kcatGroupConsume(ctx, path, op)
	case opProduce:
		// One record per line, key and value split at a tab; -Z turns an
		// empty value into a null (tombstone) and an empty key into null.
		var in bytes.Buffer
		for _, r := range op.Records {
			if r.Key != nil {
				in.WriteString(*r.Key)
			}
			in.WriteByte('\t')
			if r.Value != nil {
				if *r.Value == "" {
					return Result{ErrorCode: -1, Error: "kcat cannot send an empty non-null value with -Z"}
				}
				in.WriteString(*r.Value)
			}
			in.WriteByte('\n')
		}
		args := []string{"-P", "-b", op.Bootstrap, "-t", op.Topic, "-p", part, "-K", "\t", "-Z",
			"-X", "acks=all", "-X", "linger.ms=20"}
		if op.Compression != "" && op.Compression != "none" {
			args = append(args, "-z", op.Compression)
		}
		if op.Idempotent {
			args = append(args, "-X", "enable.idempotence=true")
		}
		_, stderr, err := kcatRun(ctx, path, in.Bytes(), args...)
		if err != nil || strings.Contains(stderr, "Delivery failed") {
			return kcatFail(args, stderr, err)
		}
		return res
	case opFetch:
		from := "beginning"
		if op.Offset >= 0 {
			from = strconv.FormatInt(op.Offset, 10)
		}
		args := []string{"-C", "-b", op.Bootstrap, "-t", op.Topic, "-p", part, "-o", from, "-c", strconv.Itoa(op.Max), "-e", "-J"}
		if op.Isolation != "" {
			args = append(args, "-X", "isolation.level="+op.Isolation)
		}
		stdout, stderr, err := kcatRun(ctx, path, nil, args...)
		if err != nil {
			return kcatFail(args, stderr, err)
		}
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var m struct {
				Partition int32    `json:"partition"`
				Offset    int64    `json:"offset"`
				Ts        int64    `json:"ts"`
				Key       *string  `json:"key"`
				Payload   *string  `json:"payload"`
				Headers   []string `json:"headers"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return Result{ErrorCode: -1, Error: fmt.Sprintf("kcat output %q: %v", line, err)}
			}
			r := Rec{Key: m.Key, Value: m.Payload, Timestamp: m.Ts, Partition: m.Partition, Offset: m.Offset}
			for i := 0; i+1 < len(m.Headers); i += 2 {
				r.Headers = append(r.Headers, [2]string{m.Headers[i], m.Headers[i+1]})
			}
			res.Records = append(res.Records, r)
		}
		return res
	case opOffsetForTime, opWatermarks:
		query := func(ts int64) (int64, Result) {
			args := []string{"-Q", "-b", op.Bootstrap, "-t", fmt.Sprintf("%s:%d:%d", op.Topic, op.Partition, ts), "-J"}
			stdout, stderr, err := kcatRun(ctx, path, nil, args...)
			if err != nil {
				return 0, kcatFail(args, stderr, err)
			}
			var out map[string]map[string]json.RawMessage
			if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out); err != nil {
				return 0, Result{ErrorCode: -1, Error: fmt.Sprintf("kcat -Q output %q: %v", stdout, err)}
			}
			var p struct {
				Offset int64  `json:"offset"`
				Err    string `json:"err"`
			}
			if err := json.Unmarshal(out[op.Topic][strconv.Itoa(int(op.Partition))], &p); err != nil {
				return 0, Result{ErrorCode: -1, Error: fmt.Sprintf("kcat -Q output %q: %v", stdout, err)}
			}
			if p.Err != "" {
				return 0, kcatFail(args, p.Err, fmt.Errorf("query failed"))
			}
			return p.Offset, Result{}
		}
		if op.Op == opOffsetForTime {
			o, r := query(op.Timestamp)
			r.Offset = o
			return r
		}
		lo, r := query(-2)
		if r.ErrorCode != 0 {
			return r
		}
		hi, r := query(-1)
		r.Low, r.High = lo, hi
		return r
	}
	return Result{ErrorCode: -1, Error: "unsupported op " + op.Op}
}

func TestKcat(t *testing.T) { t.Parallel(); runSuite(t, kcatClient(t)) }
