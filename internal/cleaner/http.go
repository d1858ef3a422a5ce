package cleaner

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// HTTPHandler serves the admin API:
//
//	GET  /v1/compaction?topic=T                  -> JSON array of PartitionStatus ("" = all)
//	POST /v1/compaction/run?topic=T&partition=P  -> runs CleanNow (P absent or -1 = all
//	                                                partitions of T), returns the JSON status
func (c *Cleaner) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/compaction", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.Status(r.URL.Query().Get("topic")))
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
