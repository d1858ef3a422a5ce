package server

import (
	"github.com/twmb/franz-go/pkg/kgo"
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
	switch s.ib.SASLMechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.ib.Username, Pass: s.ib.Password}.AsSha512Mechanism()))
	}
	return opts
}
