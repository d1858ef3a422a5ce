package main

// Shared plumbing of the admin commands (topic, produce, consume, group):
// connection flags, client construction with a reachability check, error
// translation, topic look-up and flag parsing (output is in output.go).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// defaultBrokers is used when neither --brokers nor STRATA_BROKERS is set.
const defaultBrokers = "127.0.0.1:9092"

// clientOpts are the flags every admin command shares.
type clientOpts struct {
	brokers string
	output  string
	timeout time.Duration
	// TLS to an SSL listener: --tls, --tls-ca, --tls-cert, --tls-key.
	tls     bool
	tlsCA   string
	tlsCert string
	tlsKey  string
	// SASL to a SASL_PLAINTEXT or SASL_SSL listener: --sasl-mechanism,
	// --sasl-user, --sasl-password (env STRATA_SASL_PASSWORD).
	saslMechanism string
	saslUser      string
	saslPassword  string
}

// addClientFlags registers --brokers, -o/--output, --timeout and the TLS
// and SASL flags on cmd and its subcommands.
func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	def := os.Getenv("STRATA_BROKERS")
	if def == "" {
		def = defaultBrokers
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.brokers, "brokers", def, "comma-separated bootstrap brokers (env STRATA_BROKERS)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 15*time.Second, "how long to wait for the cluster")
	f.BoolVar(&o.tls, "tls", false, "connect with TLS (the brokers' listener is SSL://); the broker certificate is verified against the system CAs or --tls-ca")
	f.StringVar(&o.tlsCA, "tls-ca", "", "PEM file of CA certificates to verify the broker certificate with (implies --tls)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM client certificate (chain) for mutual TLS, with --tls-key (implies --tls)")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM unencrypted private key of --tls-cert (implies --tls)")
	f.StringVar(&o.saslMechanism, "sasl-mechanism", "", "authenticate with SASL (the brokers' listener is SASL_PLAINTEXT:// or, with --tls, SASL_SSL://): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&o.saslUser, "sasl-user", "", "SASL user name (with --sasl-mechanism)")
	f.StringVar(&o.saslPassword, "sasl-password", os.Getenv("STRATA_SASL_PASSWORD"), "SASL password (with --sasl-mechanism; env STRATA_SASL_PASSWORD keeps it out of the process list)")
}

// saslMech builds the client SASL mechanism from the SASL flags; nil
// means no SASL.
func (o *clientOpts) saslMech() (sasl.Mechanism, error) {
	if o.saslMechanism == "" {
		if o.saslUser != "" {
			return nil, errors.New("--sasl-user needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return nil, nil
	}
	if o.saslUser == "" || o.saslPassword == "" {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-user and --sasl-password (or env STRATA_SASL_PASSWORD)", o.saslMechanism)
	}
	switch o.saslMechanism {
	case "PLAIN":
		return plain.Auth{User: o.saslUser, Pass: o.saslPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", o.saslMechanism)
}

// tlsConfig builds the client TLS configuration from the TLS flags; nil
// means plaintext. --tls-ca, --tls-cert and --tls-key imply --tls.
func (o *clientOpts) tlsConfig() (*tls.Config, error) {
	if !o.tls && o.tlsCA == "" && o.tlsCert == "" && o.tlsKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsCA != "" {
		data, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", o.tlsCA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case o.tlsCert != "" && o.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case o.tlsCert != "":
		return nil, errors.New("--tls-cert needs --tls-key")
	case o.tlsKey != "":
		return nil, errors.New("--tls-key needs --tls-cert")
	}
	return cfg, nil
}

// seeds splits --brokers.
func (o *clientOpts) seeds() []string {
	var out []string
	for _, s := range strings.Split(o.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// connect builds a client and checks that a broker answers, so a broker
// that is down gives one clear error instead of retries until timeout.
func (o *clientOpts) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	if err := checkOutput(o.output); err != nil {
		return nil, err
	}
	tlsCfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.seeds()...),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(o.timeout),
		kgo.ClientID("strata-cli"),
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	mech, err := o.saslMech()
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot reach broker at %s: %w", o.brokers, err)
	}
	return cl, nil
}

// admin is connect wrapped in a kadm client.
func (o *clientOpts) admin(ctx context.Context) (*kadm.Client, error) {
	cl, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(o.timeout / time.Millisecond))
	return adm, nil
}

// withAdmin runs fn with an admin client and a context that parent and
// --timeout bound, closing both when fn returns.
func (o *clientOpts) withAdmin(parent context.Context, fn func(ctx context.Context, adm *kadm.Client) error) error {
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	defer cancel()
	adm, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	return fn(ctx, adm)
}

// lookupTopic fetches one topic's metadata (internal topics only when
// internal is set); kind words the errors ("consume", "describe topic").
func lookupTopic(ctx context.Context, adm *kadm.Client, kind, topic string, internal bool) (kadm.TopicDetail, error) {
	var tds kadm.TopicDetails
	var err error
	if internal {
		tds, err = adm.ListTopicsWithInternal(ctx, topic)
	} else {
		tds, err = adm.ListTopics(ctx, topic)
	}
	if err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("%s %q: %w", kind, topic, err)
	}
	td, ok := tds[topic]
	if !ok {
		return kadm.TopicDetail{}, fmt.Errorf("unknown topic %q", topic)
	}
	if err := kafkaErr(kind, topic, td.Err, ""); err != nil {
		return kadm.TopicDetail{}, err
	}
	return td, nil
}

// selectPartitions returns the partitions of td listed in only (each must
// exist), or every partition when only is empty.
func selectPartitions(td kadm.TopicDetail, only []int32) (map[int32]bool, error) {
	parts := map[int32]bool{}
	for _, p := range only {
		if _, ok := td.Partitions[p]; !ok {
			return nil, fmt.Errorf("topic %q has no partition %d", td.Topic, p)
		}
		parts[p] = true
	}
	if len(parts) == 0 {
		for p := range td.Partitions {
			parts[p] = true
		}
	}
	return parts, nil
}

// kafkaErr turns a per-resource Kafka error into the CLI's wording.
func kafkaErr(kind, name string, err error, msg string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("unknown topic %q", name)
	case errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("topic %q already exists", name)
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("unknown group %q", name)
	}
	var ke *kerr.Error
	if msg != "" && errors.As(err, &ke) {
		// The broker's message says what is wrong; the code goes last.
		return fmt.Errorf("%s %q: %s (%w)", kind, name, msg, kafkaCode{ke})
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		return fmt.Errorf("%s %q: %w: %s", kind, name, err, msg)
	}
	return fmt.Errorf("%s %q: %w", kind, name, err)
}

// kafkaCode prints a Kafka error as its name only (INVALID_CONFIG),
// keeping it matchable with errors.Is.
type kafkaCode struct{ e *kerr.Error }

// Error is the Kafka error's name.
func (k kafkaCode) Error() string { return k.e.Message }

// Unwrap exposes the kerr error to errors.Is.
func (k kafkaCode) Unwrap() error { return k.e }

// parseKV parses repeated k=v flags.
func parseKV(items []string, what string) (map[string]string, error) {
	out := map[string]string{}
	for _, it := range items {
		k, v, err := cutKV(it, what)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// cutKV splits one key=value flag value; what names the flag in the error.
func cutKV(item, what string) (string, string, error) {
	k, v, ok := strings.Cut(item, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("invalid %s %q: expected key=value", what, item)
	}
	return k, v, nil
}
