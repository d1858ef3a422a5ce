package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// allServed accepts every key kmsg knows, at every version kmsg knows.
func allServed(key int16) (int16, int16, bool) {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return 0, 0, false
	}
	return 0, r.MaxVersion(), true
}

// encodeRequest builds a request body (header v1/v2 + body) like a client.
func encodeRequest(req kmsg.Request, corr int32, clientID string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func seedRequests() [][]byte {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("a")
	meta.Topics = append(meta.Topics, t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "x", "1"
	prod := kmsg.NewPtrProduceRequest()
	prod.Version = 9
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{0, 1, 2}
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic = "t"
	ctt.Configs = append(ctt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: "a", Value: kmsg.StringPtr("b")})
	ct.Topics = append(ct.Topics, ctt)
	var out [][]byte
	for _, r := range []kmsg.Request{meta, av, prod, fetch, ct} {
		out = append(out, encodeRequest(r, 7, "fuzz"))
	}
	return out
}

func TestDecodeRequestRoundTrip(t *testing.T) {
	for _, body := range seedRequests() {
		req, err := decodeRequest(body, allServed)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if req.corr != 7 || req.clientID != "fuzz" || req.msg == nil {
			t.Fatalf("header: %+v", req.header)
		}
		again := encodeRequest(req.msg, 7, "fuzz")
		if !bytes.Equal(again, body) {
			t.Errorf("key %d: re-encoding differs", req.key)
		}
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	good := seedRequests()[0]
	cases := map[string][]byte{
		"empty":          {},
		"short header":   good[:5],
		"unknown key":    append([]byte{0x7f, 0x00}, good[2:]...),
		"bad version":    append([]byte{0, 3, 0x7f, 0}, good[4:]...),
		"truncated body": good[:len(good)-3],
		"huge client id": append(append([]byte{}, good[:8]...), 0x7f, 0xff),
	}
	for name, body := range cases {
		if _, err := decodeRequest(body, allServed); !errors.Is(err, errFrame) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	// ApiVersions above the served range decodes to a nil message (KIP-511).
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	body := encodeRequest(av, 1, "c")
	req, err := decodeRequest(body, func(int16) (int16, int16, bool) { return 0, 2, true })
	if err != nil || req.msg != nil {
		t.Errorf("ApiVersions v3 against max 2: %v %v", err, req.msg)
	}
}

func TestReadFrameLimits(t *testing.T) {
	frame := func(n int32, body []byte) *bytes.Reader {
		b := binary.BigEndian.AppendUint32(nil, uint32(n))
		return bytes.NewReader(append(b, body...))
	}
	if _, err := new(framePool).readFrame(frame(-1, nil), 100); !errors.Is(err, errFrame) {
		t.Errorf("negative size: %v", err)
	}
	if _, err := new(framePool).readFrame(frame(101, make([]byte, 101)), 100); !errors.Is(err, errFrame) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := new(framePool).readFrame(frame(50, make([]byte, 20)), 100); !errors.Is(err, errFrame) {
		t.Errorf("truncated: %v", err)
	}
	if b, err := new(framePool).readFrame(frame(50, make([]byte, 50)), 100); err != nil || len(b) != 50 {
		t.Errorf("exact: %v %d", err, len(b))
	}
}

// FuzzDecodeRequest feeds arbitrary bodies to the request decoder: it must
// return a request or an errFrame error, never panic or hang.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body, allServed)
		if err != nil {
			if !errors.Is(err, errFrame) {
				t.Fatalf("error not errFrame: %v", err)
			}
			return
		}
		if req.msg == nil && req.key != 18 {
			t.Fatalf("nil message for key %d", req.key)
		}
	})
}

// FuzzReadFrame feeds arbitrary byte streams to the framing reader.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		for {
			b, err := new(framePool).readFrame(r, 1<<16)
			if err != nil {
				return
			}
			if len(b) < minFrame || len(b) > 1<<16 {
				t.Fatalf("frame of %d bytes accepted", len(b))
			}
		}
	})
}
