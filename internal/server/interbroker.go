package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// interBrokerOpts are the client options of every connection this broker
// opens to another broker (replica fetchers, transaction markers,
// AddPartitionsToTxn verification): TLS and SASL of the inter-broker
// listener, as Kafka's broker builds its inter-broker channels from the
// inter-broker listener's settings (inter.broker.listener.name or
// security.inter.broker.protocol, sasl.mechanism.inter.broker.protocol,
// the listener's JAAS entry and key/trust stores). The receiving broker
// authenticates the connection like any client's and authorizes the
// broker principal (CLUSTER_ACTION on the cluster for Fetch from a
// replica, WriteTxnMarkers and AddPartitionsToTxn v4).
func (s *Server) interBrokerOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.ib.TLS != nil {
		// franz-go sets ServerName to the host dialled when it is
		// empty: with ssl.endpoint.identification.algorithm=https the
		// peer's certificate must name its advertised host.
		opts = append(opts, kgo.DialTLSConfig(s.ib.TLS.Clone()))
	}
	if mech := s.interBrokerMechanism(); mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts
}

// interBrokerMechanism is the SASL mechanism, with this broker's
// credentials, of the inter-broker listener (nil without SASL).
func (s *Server) interBrokerMechanism() sasl.Mechanism {
	switch s.ib.SASLMechanism {
	case "PLAIN":
		return plain.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsSha512Mechanism()
	}
	return nil
}

// dialInterBroker opens a connection to another broker at addr (its
// endpoint on the inter-broker listener) as the replica fetchers' clients
// do: TLS with the listener's trust store (and key store as client
// certificate), then SASL with this broker's credentials, so that what is
// returned is an authenticated connection ready for Kafka requests.
func (s *Server) dialInterBroker(ctx context.Context, addr string) (net.Conn, error) {
	if s.ib.Unavailable != "" {
		return nil, errors.New(s.ib.Unavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if s.ib.TLS != nil {
		cfg := s.ib.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	if mech := s.interBrokerMechanism(); mech != nil {
		if err := saslAuthenticate(ctx, nc, addr, mech); err != nil {
			nc.Close()
			return nil, fmt.Errorf("SASL %s with %s: %w", mech.Name(), addr, err)
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}

// saslAuthenticate runs Kafka's SASL exchange on c (KIP-152:
// SaslHandshake v1, then SaslAuthenticate v1 until the mechanism is done).
func saslAuthenticate(ctx context.Context, c net.Conn, addr string, mech sasl.Mechanism) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	resp, err := rawRequest(c, hs, 1)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	session, msg, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for corr := int32(2); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp, err := rawRequest(c, req, corr)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			if ar.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *ar.ErrorMessage)
			}
			return err
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done && len(next) == 0 {
			return nil
		}
		msg = next
	}
}

// maxRawResponse bounds the SASL responses saslAuthenticate reads.
const maxRawResponse = 1 << 20

// rawRequest sends req (a version without flexible headers) on c with
// correlation id corr and decodes its response.
func rawRequest(c net.Conn, req kmsg.Request, corr int32) (kmsg.Response, error) {
	clientID := "strata-broker"
	frame := make([]byte, 4, 64)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(clientID)))
	frame = append(frame, clientID...)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.Write(frame); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxRawResponse {
		return nil, fmt.Errorf("response of %d bytes", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %T: %w", resp, err)
	}
	return resp, nil
}
