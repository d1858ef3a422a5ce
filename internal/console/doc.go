// Package console is Strata's web console: server-rendered pages at / on
// the broker's HTTP listener (strata.metrics.listener) for the overview,
// topics (configs, partitions, groups reading them), messages (browse,
// tail, produce), consumer groups (lag, reset, delete) and compaction.
//
// # Data access
//
// Everything Kafka has an API for, the console asks through the Kafka
// protocol: a franz-go client (kgo, kadm) whose connections are in-process
// pipes into this broker's own protocol server (protocol.ServeInProcess).
// So every read and every change takes exactly the path a Kafka client's
// request takes, with the same validation, errors and metrics: a config
// edit is an IncrementalAlterConfigs request, a produced record a Produce
// request, a group reset an OffsetCommit, the group delete a DeleteGroups.
// Nothing is duplicated or bypassed, no socket, TLS or SASL credential is
// needed to reach the broker, and what the page shows is what a client sees
// (including, once Strata is a cluster, the metadata of the other brokers).
// Going through the Go APIs of broker and group instead would mean
// re-implementing each handler's validation beside it.
//
// What Kafka has no API for comes from the package that owns it: the
// cleaner's status and "clean now" (the same calls as /v1/compaction), the
// rates from the broker's own Prometheus registry (gathered in process,
// not scraped), the SCRAM credentials that logins are checked against,
// and what the cluster knows beyond Metadata (broker epochs and states),
// through the small ClusterSource interface.
//
// # Security
//
// On a loopback listener the console needs no login (and answers only to
// loopback host names, against DNS rebinding); on any other address every
// page requires a login with a SCRAM user of the broker, whose password is
// checked against the stored credential. Sessions live in memory behind a
// random HttpOnly, SameSite=Strict cookie (Secure when the request came over
// HTTPS). Every change is a POST carrying a CSRF token bound to the
// session, and cross-origin POSTs are refused. Pages are html/template
// output under a strict Content-Security-Policy (no inline script or
// style): keys, values and headers of records are always escaped text.
//
// # Cost
//
// Pages are rendered on the server with a little progressive-enhancement
// script (the topic filter, the live tail) and one stylesheet, embedded in
// the binary: no build step, no CDN. Message pages fetch a bounded number
// of bytes from an offset and never read a whole topic. One goroutine,
// owned by the Console and stopped by Close, samples the history the plots
// show into bounded in-memory rings.
package console
