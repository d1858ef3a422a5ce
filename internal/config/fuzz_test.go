package config

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzProperties feeds arbitrary server.properties content to LoadBroker:
// it must return settings or an error wrapping ErrInvalid (never panic),
// and every accepted value must pass its own validator.
func FuzzProperties(f *testing.F) {
	for _, s := range []string{
		"node.id=3\nlog.dirs: /a,/b\n",
		"# c\n! c\n  num.partitions   4\n",
		"log.retention.hours=\\\n 24\n",
		"a\\=b=c\n",
		"listeners=PLAINTEXT://[::1]:0\n",
		"node.id=1\nbroker.id=2\n",
		"\\",
		"log.segment.bytes=99999999999999999999\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := LoadBroker(path, nil, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for _, s := range BrokerSettings() {
			if v := b.Get(s.Name); v != "" || b.IsSet(s.Name) {
				if err := s.Validate(v); err != nil {
					t.Fatalf("accepted invalid %s=%q: %v", s.Name, v, err)
				}
			}
		}
	})
}

// FuzzTopicConfig checks that validation never panics, always wraps
// ErrInvalid, and names the setting it rejects.
func FuzzTopicConfig(f *testing.F) {
	f.Add("segment.bytes", "14")
	f.Add("cleanup.policy", "compact, delete")
	f.Add("min.cleanable.dirty.ratio", "1e-300")
	f.Add("retention.ms", "-1")
	f.Add("x", "")
	f.Fuzz(func(t *testing.T, name, value string) {
		err := ValidateTopicConfigs(map[string]*string{name: &value})
		if err == nil {
			if _, ok := LookupTopic(name); !ok {
				t.Fatalf("unknown %q accepted", name)
			}
			return
		}
		named := strings.Contains(err.Error(), name) || strings.Contains(err.Error(), strconv.Quote(name))
		if !errors.Is(err, ErrInvalid) || !named {
			t.Fatalf("bad error for %q=%q: %v", name, value, err)
		}
	})
}

// FuzzConnectionOverrides: max.connections.per.ip.overrides either parses
// to hosts of Kafka's valid host characters with non-negative counts, or
// is refused with an error wrapping ErrInvalid; never a panic.
func FuzzConnectionOverrides(f *testing.F) {
	for _, s := range []string{"", "127.0.0.1:4", "localhost:2, ::1:3", "a:b", ":1", "h:-1", "h:1,,", "h\x00:1", "[::1]:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ConnectionOverrides(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		for host, n := range m {
			if host == "" || n < 0 || strings.Trim(host, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-%._:") != "" {
				t.Fatalf("%q: accepted host %q count %d", s, host, n)
			}
		}
	})
}

// FuzzListeners feeds arbitrary listener settings (listeners,
// advertised.listeners, listener.security.protocol.map,
// controller.listener.names, controller.quorum.voters, process.roles,
// inter.broker.listener.name) to LoadBroker: it refuses them with an error
// wrapping ErrInvalid, or every listener it then hands the server has a
// valid name, a host:port that splits back, a port in 0..65535 (not 0 when
// advertised) and a known security protocol.
func FuzzListeners(f *testing.F) {
	f.Add("PLAINTEXT://:9092", "", "", "", "", "", "")
	f.Add("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "PLAINTEXT://h:9092", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", "CONTROLLER", "1@127.0.0.1:9093", "broker,controller", "")
	f.Add("INTERNAL://[::1]:9094,EXTERNAL://:9095", "EXTERNAL://example.com:19095", "INTERNAL:SASL_SSL,EXTERNAL:SSL", "", "", "", "INTERNAL")
	f.Add("SSL://:65536", "SSL://:0", "", "", "", "", "")
	f.Add("a://:1,A://:2", "", "A:PLAINTEXT", "", "x@y", "controller", "b")
	f.Fuzz(func(t *testing.T, listeners, advertised, protoMap, controllerNames, voters, roles, interBroker string) {
		ov := map[string]string{}
		for k, v := range map[string]string{"listeners": listeners, "advertised.listeners": advertised,
			"listener.security.protocol.map": protoMap, "controller.listener.names": controllerNames,
			"controller.quorum.voters": voters, "process.roles": roles, "inter.broker.listener.name": interBroker} {
			if v != "" {
				ov[k] = v
			}
		}
		b, err := LoadBroker("", nil, ov)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		check := func(what string, ls []Listener, advertised bool) {
			for _, l := range ls {
				if !validName(l.Name) || l.Port < 0 || l.Port > 65535 || (advertised && l.Port == 0) {
					t.Fatalf("%s: accepted %+v", what, l)
				}
				if l.Protocol != ProtocolPlaintext && l.Protocol != ProtocolSSL && !IsSASL(l.Protocol) {
					t.Fatalf("%s: %s has protocol %q", what, l.Name, l.Protocol)
				}
				if _, _, err := net.SplitHostPort(l.Addr()); err != nil {
					t.Fatalf("%s: %s address %q: %v", what, l.Name, l.Addr(), err)
				}
			}
		}
		check("listeners", b.Listeners(), false)
		check("client listeners", b.ClientListeners(), false)
		check("advertised listeners", b.AdvertisedListeners(), false)
		if l, ok := b.ControllerListener(); ok {
			check("controller listener", []Listener{l}, false)
		}
		for _, v := range b.Voters() {
			if v.Port <= 0 || v.Port > 65535 || v.Host == "" {
				t.Fatalf("voter %+v accepted", v)
			}
		}
		b.InterBrokerListener()
	})
}
