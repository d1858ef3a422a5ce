package quota

import "math"

// Window is the sampling of a rate: Kafka's quota.window.num samples of
// quota.window.size.seconds each (defaults 11 and 1).
type Window struct {
	Samples int
	// SizeMs is one sample's length in milliseconds.
	SizeMs int64
}

// DefaultWindow is Kafka's default sampling (11 samples of one second).
var DefaultWindow = Window{Samples: 11, SizeMs: 1000}

// sample is one window of a rate (Kafka's SampledStat.Sample).
type sample struct {
	value     float64
	events    int64
	startMs   int64
	lastEvent int64
}

func (s *sample) reset(now int64) { *s = sample{startMs: now, lastEvent: now} }

// rate is Kafka's Rate over a WindowedSum (org.apache.kafka.common.metrics.
// stats.Rate and SampledStat): up to Samples+1 samples in a ring, a sample
// ending after SizeMs, samples idle for Samples*SizeMs reset, and the rate
// the sum of the samples divided by the elapsed time since the oldest
// sample, counted as at least Samples-1 whole windows.
type rate struct {
	samples []sample
	current int
}

func (r *rate) cur(now int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: now, lastEvent: now})
	}
	return &r.samples[r.current]
}

func (r *rate) record(w Window, value float64, now int64) {
	s := r.cur(now)
	if now-s.startMs >= w.SizeMs {
		r.current = (r.current + 1) % (w.Samples + 1)
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, sample{startMs: now, lastEvent: now})
		} else {
			r.samples[r.current].reset(now)
		}
		s = &r.samples[r.current]
	}
	s.value += value
	s.events++
	s.lastEvent = now
}

func (r *rate) purge(w Window, now int64) {
	expire := int64(w.Samples) * w.SizeMs
	for i := range r.samples {
		if now-r.samples[i].lastEvent >= expire {
			r.samples[i].reset(now)
		}
	}
}

// windowMs is Rate.windowSize: the time the rate is measured over.
func (r *rate) windowMs(w Window, now int64) int64 {
	r.purge(w, now)
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: now, lastEvent: now})
	}
	oldest := r.samples[0].startMs
	for _, s := range r.samples[1:] {
		oldest = min(oldest, s.startMs)
	}
	elapsed := now - oldest
	full := elapsed / w.SizeMs
	if minFull := int64(w.Samples - 1); full < minFull {
		elapsed += (minFull - full) * w.SizeMs
	}
	return max(elapsed, 1)
}

// measure is the rate per second at now.
func (r *rate) measure(w Window, now int64) float64 {
	r.purge(w, now)
	total := 0.0
	for _, s := range r.samples {
		total += s.value
	}
	return total / (float64(r.windowMs(w, now)) / 1000)
}

// throttleMs is Kafka's QuotaUtils.throttleTime: the delay X that brings
// the observed rate O back to the bound T over the window W,
// O*W/(W+X) = T, so X = (O-T)/T*W, rounded.
func throttleMs(observed, bound float64, windowMs int64) int64 {
	return int64(math.Round((observed - bound) / bound * float64(windowMs)))
}

// bucket is Kafka's TokenBucket (controller mutations): refilled at the
// quota per second up to a burst of Samples*SizeSeconds*quota; recording
// takes tokens and may drive it negative.
type bucket struct {
	tokens  float64
	lastMs  int64
	started bool
}

func burst(w Window, quota float64) float64 {
	return float64(w.Samples) * float64(w.SizeMs) / 1000 * quota
}

func (b *bucket) refill(w Window, quota float64, now int64) {
	if !b.started {
		// Kafka's bucket starts empty at time 0, so its first refill fills
		// it: start full.
		b.tokens, b.lastMs, b.started = burst(w, quota), now, true
		return
	}
	b.tokens = math.Min(burst(w, quota), b.tokens+quota*float64(now-b.lastMs)/1000)
	b.lastMs = now
}

func (b *bucket) measure(w Window, quota float64, now int64) float64 {
	b.refill(w, quota, now)
	return b.tokens
}

func (b *bucket) record(w Window, quota, value float64, now int64) {
	b.refill(w, quota, now)
	b.tokens = math.Min(burst(w, quota), b.tokens-value)
}
