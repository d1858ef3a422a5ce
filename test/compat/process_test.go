package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// procResult is a Result plus what a driver script reports about itself.
type procResult struct {
	Result
	Ops []string `json:"ops"`
}

// runDriver runs argv with op as JSON on stdin and decodes the last stdout
// line as the result.
func runDriver(ctx context.Context, argv []string, dir string, op Op) procResult {
	if op.TimeoutMs == 0 {
		op.TimeoutMs = int((opTimeout - 5*time.Second) / time.Millisecond)
	}
	in, err := json.Marshal(op)
	if err != nil {
		return procResult{Result: Result{ErrorCode: -1, Error: err.Error()}}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res procResult
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil {
		return procResult{Result: Result{ErrorCode: -1, Error: fmt.Sprintf("%s %s: exit %v, unreadable output: %v\nstdout: %s\nstderr: %s",
			argv[len(argv)-1], op.Op, runErr, jerr, tail(stdout.String()), tail(stderr.String()))}}
	}
	if res.ErrorCode != 0 && stderr.Len() > 0 {
		res.Error += "\nstderr: " + tail(stderr.String())
	}
	return res
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// scriptClient builds a Client whose operations run a driver script. The
// script's "versions" op reports client versions, supported ops and codecs.
func scriptClient(t *testing.T, name string, argv []string, dir string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	v := runDriver(ctx, argv, dir, Op{Op: opVersions})
	if v.ErrorCode != 0 {
		missing(t, fmt.Sprintf("%s driver does not start: %s", name, v.Error))
	}
	return &Client{
		Name:     name,
		Supports: set(v.Ops...),
		Codecs:   v.Codecs,
		Versions: v.Versions,
		argv:     argv,
		dir:      dir,
		do: func(ctx context.Context, op Op) Result {
			return runDriver(ctx, argv, dir, op).Result
		},
	}
}

// pythonFor finds a Python 3 that can import module (Debian's packages live
// in /usr/bin/python3's path, which a pyenv python3 on PATH does not see).
func pythonFor(t *testing.T, module string) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import "+module).CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(out))))
	}
	missing(t, fmt.Sprintf("no python3 can import %s (Debian package python3-%s): %s",
		module, strings.ReplaceAll(module, "_", "-"), strings.Join(tried, "; ")))
	return ""
}

func confluentClient(t *testing.T) *Client {
	py := pythonFor(t, "confluent_kafka")
	dir, _ := filepath.Abs("python")
	c := scriptClient(t, "confluent-kafka-python", []string{py, filepath.Join(dir, "confluent_driver.py")}, dir)
	c.Librdkafka = true
	return c
}

func TestConfluentKafkaPython(t *testing.T) { t.Parallel(); runSuite(t, confluentClient(t)) }

func kafkaPythonClient(t *testing.T) *Client {
	py := pythonFor(t, "kafka")
	dir, _ := filepath.Abs("python")
	c := scriptClient(t, "kafka-python", []string{py, filepath.Join(dir, "kafkapython_driver.py")}, dir)
	if len(c.Codecs) < 5 {
		// kafka-python needs python3-snappy, python3-lz4 and
		// python3-zstandard for those codecs; without them it tests fewer.
		missing(t, fmt.Sprintf("kafka-python supports only codecs %v here (python3-snappy, python3-lz4, python3-zstandard)", c.Codecs))
	}
	return c
}

func TestKafkaPython(t *testing.T) { t.Parallel(); runSuite(t, kafkaPythonClient(t)) }

func kafkaJSClient(t *testing.T) *Client {
	node := requireTool(t, "node", "--version")
	dir, _ := filepath.Abs("node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		missing(t, "kafkajs not installed: run `npm ci --prefix test/compat/node`")
	}
	return scriptClient(t, "kafkajs", []string{node, filepath.Join(dir, "driver.js")}, dir)
}

func TestKafkaJS(t *testing.T) { t.Parallel(); runSuite(t, kafkaJSClient(t)) }
