package fpm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostPhases(t *testing.T) {
	h := DefaultHostModel()
	require.NoError(t, h.Validate())
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"schedule empty", h.ScheduleNs(0, 0), 150_000},
		{"schedule 10 cached", h.ScheduleNs(10, 0), 150_000 + 40_000},
		{"schedule 10 new", h.ScheduleNs(10, 10), 150_000 + 40_000 + 300_000},
		{"ship 0 B", h.ShipNs(0), 60_000},
		{"ship 2 MB at 200 MB/s", h.ShipNs(2_000_000), 60_000 + 10_000_000},
		{"prep 4 decodes", h.PrepNs(4, 4, 0, 0), 250_000 + 6_000 + 12},
		{"prep 1 new of 1000 tokens", h.PrepNs(1, 1000, 1, 1000), 250_000 + 1_500 + 3_000 + 150_000 + 8_000},
		{"update 4", h.UpdateNs(4), 150_000 + 16_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.got)
		})
	}
	ts := h.Times(HostStep{Requests: 4, ScheduledTokens: 4, PayloadBytes: 0})
	assert.Equal(t, HostTimes{ScheduleNs: 166_000, ShipNs: 60_000, PrepNs: 256_012, UpdateNs: 166_000}, ts)
	assert.Equal(t, int64(166_000+60_000+256_012+166_000), ts.TotalNs())
	// OutputRequests, when set, prices update_from_output.
	assert.Equal(t, h.UpdateNs(2), h.Times(HostStep{Requests: 4, OutputRequests: 2}).UpdateNs)
	// ShipMBps 0: shipping costs its fixed part only.
	free := h
	free.ShipMBps = 0
	assert.Equal(t, int64(60_000), free.ShipNs(1e9))
}

// admissionVsSteady returns the modelled time (device + host, no overlap)
// of a decode step of b requests at ctx tokens each, admitted through
// scheduled_new_reqs, and of the same step on the request's second step
// (scheduled_cached_reqs), as the source document measures them.
func admissionVsSteady(r Roofline, h HostModel, p PayloadModel, b, ctx int) (adm, steady float64, admHost, steadyHost HostTimes) {
	dev := r.PredictNs(decodeStep(float64(b), float64(ctx)))
	admHost = h.Times(HostStep{Requests: b, NewRequests: b, ScheduledTokens: b, NewTokens: b * ctx,
		PayloadBytes: p.StepBytes(PayloadStep{NewReqs: b, NewTokens: b * ctx, NewBlocks: b * blocksFor(ctx, 16)})})
	steadyHost = h.Times(HostStep{Requests: b, ScheduledTokens: b,
		PayloadBytes: p.StepBytes(PayloadStep{CachedReqs: b})})
	return dev + float64(admHost.TotalNs()), dev + float64(steadyHost.TotalNs()), admHost, steadyHost
}

// TestHostAdmissionInflation: with the default priors an admission decode
// step is clearly inflated against the steady one, increasingly with B,
// and by 2–6× at B=256 with 4K contexts (Llama-3.1-8B, H200) — the
// mechanism of R3 (docs/architecture.md#r3-admission-step-contamination).
func TestHostAdmissionInflation(t *testing.T) {
	r := NewRoofline(h200, llama8B)
	h, p := DefaultHostModel(), DefaultPayloadModel()
	tests := []struct {
		b      int
		lo, hi float64
	}{
		{1, 1.0, 1.2},
		{16, 1.1, 2.0},
		{64, 1.5, 3.5},
		{256, 2.0, 6.0},
		{513, 2.0, 6.0},
	}
	prev := 0.0
	for _, tc := range tests {
		adm, steady, ah, sh := admissionVsSteady(r, h, p, tc.b, 4096)
		ratio := adm / steady
		t.Logf("B=%d: admission %.2f ms (host %.2f) vs steady %.2f ms (host %.2f): %.2fx",
			tc.b, adm/1e6, float64(ah.TotalNs())/1e6, steady/1e6, float64(sh.TotalNs())/1e6, ratio)
		assert.Greater(t, ratio, prev, "B=%d: inflation grows with B", tc.b)
		assert.GreaterOrEqual(t, ratio, tc.lo, "B=%d", tc.b)
		assert.LessOrEqual(t, ratio, tc.hi, "B=%d", tc.b)
		prev = ratio
		// Every host phase costs more on the admission step but update.
		assert.Greater(t, ah.ScheduleNs, sh.ScheduleNs)
		assert.Greater(t, ah.ShipNs, sh.ShipNs)
		assert.Greater(t, ah.PrepNs, sh.PrepNs)
		assert.Equal(t, ah.UpdateNs, sh.UpdateNs)
	}
	// The steady step's host work is small against its device time at
	// large B (it is what production decode pays).
	_, steady, _, sh := admissionVsSteady(r, h, p, 256, 4096)
	assert.Less(t, float64(sh.TotalNs()), 0.15*steady)
}

func TestHostValidate(t *testing.T) {
	h := DefaultHostModel()
	h.PrepPerNewReqNs = -1
	err := h.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prep_per_new_req_ns")
}

func TestHostJSONRoundTrip(t *testing.T) {
	h := DefaultHostModel()
	b, err := json.Marshal(h)
	require.NoError(t, err)
	for _, k := range []string{"schedule_fixed_ns", "schedule_per_new_req_ns", "ship_mb_per_s", "prep_per_new_req_ns", "prep_per_new_token_ns", "update_per_req_ns"} {
		assert.Contains(t, string(b), `"`+k+`"`)
	}
	var back HostModel
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, h, back)
	tb, err := json.Marshal(back.Times(HostStep{Requests: 2, NewRequests: 1, NewTokens: 10, PayloadBytes: 1000}))
	require.NoError(t, err)
	var tt HostTimes
	require.NoError(t, json.Unmarshal(tb, &tt))
	assert.Equal(t, back.Times(HostStep{Requests: 2, NewRequests: 1, NewTokens: 10, PayloadBytes: 1000}), tt)
}
