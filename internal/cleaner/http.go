package cleaner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// HTTPHandler serves the admin API:
//
//	GET  /v1/compaction?topic=T                  -> JSON array of PartitionStatus ("" = all)
//	POST /v1/compaction/run?topic=T&partition=P  -> runs CleanNow (P absent or -1 = all
//	                                                partitions of T), returns the JSON status
//
// A topic the broker does not have, or that is not compacted, is a 404
// with {"error": "..."} saying which.
func (c *Cleaner) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/compaction", func(w http.ResponseWriter, r *http.Request) {
		topic := r.URL.Query().Get("topic")
		if topic != "" {
			if msg := c.notCompacted(topic); msg != "" {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
				return
			}
		}
		writeJSON(w, http.StatusOK, c.Status(topic))
	})
	mux.HandleFunc("POST /v1/compaction/run", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		topic := q.Get("topic")
		if topic == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "topic is required"})
			return
		}
		part := int64(-1)
		if s := q.Get("partition"); s != "" {
			var err error
			if part, err = strconv.ParseInt(s, 10, 32); err != nil || part < -1 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad partition " + strconv.Quote(s)})
				return
			}
		}
		if msg := c.notCompacted(topic); msg != "" {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
			return
		}
		err := c.CleanNow(r.Context(), topic, int32(part))
		status := c.Status(topic)
		if part >= 0 {
			filtered := status[:0]
			for _, s := range status {
				if s.Partition == int32(part) {
					filtered = append(filtered, s)
				}
			}
			status = filtered
		}
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, status)
		case errors.Is(err, ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case errors.Is(err, ErrDisabled):
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error(), "status": status})
		}
	})
	return mux
}

// notCompacted says why topic has no compaction status ("" when it has).
func (c *Cleaner) notCompacted(topic string) string {
	switch exists, compacted := c.Lookup(topic); {
	case !exists:
		return fmt.Sprintf("unknown topic %q", topic)
	case !compacted:
		return fmt.Sprintf("topic %q is not compacted (set cleanup.policy=compact to compact it)", topic)
	}
	return ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
