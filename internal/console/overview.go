package console

import (
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

type overviewData struct {
	ClusterID  string
	Mode       string
	Controller string // Metadata's controller id
	Quorum     string // the controller quorum, from the ClusterSource
	Brokers    []brokerRow
	Topics     int
	Internal   int
	Partitions int
	URP        int
	Offline    int
	Dirs       []dirRow
	Rates      rates
	BytesPlot  plot
	MsgsPlot   plot
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
	parallel(
		func() { md, mdErr = c.kafkaFor(ctx).metadata(ctx) },
		func() { cs, csErr = c.cluster.ClusterState(ctx) },
		func() { _, dirs, dirErr = c.kafkaFor(ctx).sizes(ctx, nil) },
	)
	if err := errors.Join(mdErr, csErr); err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d := overviewData{ClusterID: md.Cluster, Mode: cs.Mode, Controller: idOrNone(md.Controller)}
	if len(cs.Controllers) > 0 {
		d.Quorum = "voters " + fmtIDs(cs.Controllers) + ", active " + idOrNone(cs.ActiveController)
	}
	leaders, replicas := map[int32]int{}, map[int32]int{}
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
			}
			for _, id := range p.Replicas {
				replicas[id]++
			}
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
		d.Brokers = append(d.Brokers, row)
	}
	sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].ID < d.Brokers[j].ID })
	if dirErr == nil {
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
	} else {
		d.Dirs = append(d.Dirs, dirRow{Broker: -1, Err: dirErr.Error(), Used: -1, Total: -1, Usable: -1, Full: -1})
	}
	d.Rates = c.hist.lastRates()
	d.BytesPlot = newPlot("Bytes produced per second", c.hist.get(keyBytesIn), 320, 80, fmtBytesRate, -1, 0)
	d.MsgsPlot = newPlot("Records produced per second", c.hist.get(keyMsgsIn), 320, 80, fmtRate, -1, 0)
	c.render(w, r, http.StatusOK, "overview", "Overview", "overview", d)
}

func idOrNone(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func fmtBytesRate(f float64) string { return fmtBytes(int64(f)) + "/s" }
