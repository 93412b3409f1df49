package fit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// FitHostSteps fits each host window the steps record on its own terms.
// Prompts of one length make the new requests and their tokens move
// together: the preparation keeps the prior's coefficients, said in
// Unfitted, and the other windows are fitted all the same.
func TestFitHostStepsUnseparable(t *testing.T) {
	prior := fpm.DefaultHostModel()
	var steps []datasets.Step
	var t0 int64
	for i := range 200 {
		reqs, fresh := int64(1+i%17), int64(i%3)
		s := datasets.Step{StepID: int64(i), WorkerID: "w", NumNewReqs: int32(fresh), NumCachedReqs: int32(reqs - fresh),
			TotalScheduledTokens: reqs - fresh + 512*fresh, NewReqTokens: 512 * fresh, PayloadBytes: 1000 + 2000*fresh,
			TScheduleStart: t0, TScheduleEnd: t0 + 1000 + 100*reqs, TDispatch: t0 + 2000 + 100*reqs,
			WorkerRecvNs: 20_000 + 10*(1000+2000*fresh), HostPrepNs: 100_000 + 2_000*reqs + 40_000*fresh + 30*512*fresh,
			GPUTimeNs: 5_000_000, WallTimeNs: -1}
		s.TOutput = s.TDispatch + 6_000_000
		s.TUpdateEnd = s.TOutput + 500 + 50*reqs
		t0 = s.TUpdateEnd
		steps = append(steps, s)
	}
	hf, err := FitHostSteps(steps, nil, prior, HostStepsOptions{Serial: true})
	require.NoError(t, err)
	require.Len(t, hf.Unfitted, 1)
	assert.Contains(t, hf.Unfitted[0], "host_prep_ns")
	assert.Equal(t, prior.PrepFixedNs, hf.Model.PrepFixedNs, "an unfitted window keeps the prior")
	assert.InDelta(t, 20_000, hf.Model.ShipFixedNs, 1, "the serial worker's receive alone")
	assert.InDelta(t, 1e3/10, hf.Model.ShipMBps, 1e-6)
	assert.InDelta(t, 1000, hf.Model.ScheduleFixedNs, 1)
	assert.InDelta(t, 100, hf.Model.SchedulePerReqNs, 1e-6)
	assert.InDelta(t, 50, hf.Model.UpdatePerReqNs, 1e-6)
	assert.Equal(t, prior.OutputFixedNs, hf.Model.OutputFixedNs, "no inter-update period recorded: no output path to fit")
	_, err = FitHostSteps([]datasets.Step{{StepID: 0, HostPrepNs: -1, WorkerRecvNs: -1, TScheduleStart: -1, TScheduleEnd: -1, TOutput: -1, TUpdateEnd: -1, TDispatch: -1}}, nil, prior, HostStepsOptions{})
	require.ErrorContains(t, err, "no host window")
}
