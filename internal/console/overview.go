package console

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/strata-io/strata/internal/parallel"
	"github.com/twmb/franz-go/pkg/kadm"
)

type overviewData struct {
	NodeID     int32 // this broker
	ClusterID  string
	Mode       string
	Controller string // Metadata's controller id
	Quorum     string // the controller quorum, from the ClusterSource
	Brokers    []brokerRow
	Topics     int
	Internal   int
	Partitions int
	URP        int
	// UnderMinISR counts partitions whose ISR is smaller than their
	// topic's min.insync.replicas (acks=all produce is refused, Kafka's
	// NOT_ENOUGH_REPLICAS); -1 when the configs could not be read.
	UnderMinISR int
	Offline     int
	Dirs        []dirRow
	Rates       rates
	BytesPlot   plot
	MsgsPlot    plot
}

type brokerRow struct {
	ID       int32
	Host     string
	Port     int32
	Rack     string
	Epoch    string
	State    string
	Leaders  int
	Replicas int
	This     bool
	// Offline is a broker that replicas name but Metadata does not list.
	Offline bool
}

type dirRow struct {
	Broker        int32
	Dir           string
	Used          int64
	Total, Usable int64
	Full          float64 // fraction of the volume used (-1 unknown)
	Err           string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	var (
		md           kadm.Metadata
		cs           ClusterState
		dirs         []kadm.DescribedLogDir
		mdErr, csErr error
		dirErr       error
	)
	parallel.Do(
		func() { md, mdErr = c.kafkaFor(ctx).metadata(ctx) },
		func() { cs, csErr = c.cluster.ClusterState(ctx) },
		func() { _, dirs, dirErr = c.kafkaFor(ctx).sizes(ctx, nil) },
	)
	if err := errors.Join(mdErr, csErr); err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d := overviewData{NodeID: c.cfg.NodeID, ClusterID: md.Cluster, Mode: cs.Mode, Controller: idOrNone(md.Controller)}
	if len(cs.Controllers) > 0 {
		d.Quorum = "voters " + fmtIDs(cs.Controllers) + ", active " + idOrNone(cs.ActiveController)
	}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	shrunk := map[string]bool{} // topics with a partition under-replicated
	for _, t := range md.Topics {
		d.Topics++
		if t.IsInternal {
			d.Internal++
		}
		for _, p := range t.Partitions {
			d.Partitions++
			if p.Leader < 0 {
				d.Offline++
			} else {
				leaders[p.Leader]++
			}
			if len(p.ISR) < len(p.Replicas) {
				d.URP++
				shrunk[t.Topic] = true
			}
			for _, id := range p.Replicas {
				replicas[id]++
			}
		}
	}
	d.UnderMinISR = c.underMinISR(ctx, md, shrunk)
	listed := map[int32]bool{}
	for _, b := range md.Brokers {
		listed[b.NodeID] = true
	}
	// A broker that replicas name but Metadata does not list (stopped, or
	// its session expired) still gets a row: it is what an operator looks
	// for when partitions go under-replicated.
	for id := range replicas {
		if !listed[id] {
			md.Brokers = append(md.Brokers, kadm.BrokerDetail{NodeID: id, Port: -1})
		}
	}
	for _, b := range md.Brokers {
		row := brokerRow{ID: b.NodeID, Host: b.Host, Port: b.Port, Leaders: leaders[b.NodeID], Replicas: replicas[b.NodeID],
			This: b.NodeID == c.cfg.NodeID, Epoch: "—", State: "unknown"}
		if b.Rack != nil {
			row.Rack = *b.Rack
		}
		if st, ok := cs.Brokers[b.NodeID]; ok {
			if st.Epoch >= 0 {
				row.Epoch = strconv.FormatInt(st.Epoch, 10)
			}
			row.State = st.State
		}
		if !listed[b.NodeID] {
			row.State, row.Offline = "offline: not registered (stopped, or its session expired)", true
		}
		d.Brokers = append(d.Brokers, row)
	}
	sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].ID < d.Brokers[j].ID })
	if dirErr == nil || partial(dirErr) {
		for _, dir := range dirs {
			row := dirRow{Broker: dir.Broker, Dir: dir.Dir, Used: dir.Size(), Total: dir.TotalBytes, Usable: dir.UsableBytes, Full: -1}
			if dir.Err != nil {
				row.Err = dir.Err.Error()
			}
			if dir.TotalBytes > 0 && dir.UsableBytes >= 0 {
				row.Full = float64(dir.TotalBytes-dir.UsableBytes) / float64(dir.TotalBytes)
			}
			d.Dirs = append(d.Dirs, row)
		}
	}
	if dirErr != nil {
		d.Dirs = append(d.Dirs, dirRow{Broker: -1, Err: dirErr.Error(), Used: -1, Total: -1, Usable: -1, Full: -1})
	}
	d.Rates = c.hist.lastRates()
	d.BytesPlot = newPlot("Bytes produced per second", c.hist.get(keyBytesIn), 320, 80, fmtBytesRate, -1, 0)
	d.MsgsPlot = newPlot("Records produced per second", c.hist.get(keyMsgsIn), 320, 80, fmtRate, -1, 0)
	c.render(w, r, http.StatusOK, "overview", "Overview", "overview", d)
}

// underMinISR counts the partitions of topics (those with an
// under-replicated partition) whose ISR is smaller than the topic's
// min.insync.replicas (-1: unknown).
func (c *Console) underMinISR(ctx context.Context, md kadm.Metadata, topics map[string]bool) int {
	if len(topics) == 0 {
		return 0
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	cfgs, err := c.kafkaFor(ctx).topicConfigs(ctx, names, []string{"min.insync.replicas"})
	if err != nil {
		return -1
	}
	n := 0
	for _, t := range names {
		min, err := strconv.Atoi(cfgs[t]["min.insync.replicas"])
		if err != nil {
			return -1
		}
		for _, p := range md.Topics[t].Partitions {
			if p.Leader >= 0 && len(p.ISR) < min {
				n++
			}
		}
	}
	return n
}

func idOrNone(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func fmtBytesRate(f float64) string { return fmtBytes(int64(f)) + "/s" }
