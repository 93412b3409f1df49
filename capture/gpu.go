package capture

import (
	"errors"
	"sync"
	"time"

	"github.com/steplab/steplab/datasets"
)

// GPUInfo is the identity and configuration of one GPU, for the manifest.
type GPUInfo struct {
	Index         int
	Name, UUID    string
	Driver        string
	SMClockMHz    int
	MemClockMHz   int
	PowerLimitW   float64
	MemTotalBytes int64
}

// GPUMonitor reads GPU state. The NVML implementation needs cgo, a build
// with -tags nvml and a driver; OpenNVML returns ErrNoNVML where any is
// missing, and a capture then records no GPU samples (on CPU, say) rather
// than failing.
type GPUMonitor interface {
	Devices() ([]GPUInfo, error)
	Sample(index int) (datasets.GPUSample, error)
	Close() error
}

// ErrNoNVML is returned where NVML cannot be used.
var ErrNoNVML = errors.New("NVML not available")

// Sampler polls a GPUMonitor at a fixed period on its own goroutine and
// writes gpu_samples rows; t_ns is on the capture's clock.
type Sampler struct {
	mon    GPUMonitor
	clock  *WallClock
	tw     *datasets.TableWriter[datasets.GPUSample]
	period time.Duration
	stop   chan struct{}
	done   chan error
	once   sync.Once
}

// StartSampler begins sampling every GPU of mon into the dataset's
// gpu_samples table.
func StartSampler(mon GPUMonitor, w *datasets.Writer, clock *WallClock, period time.Duration) (*Sampler, error) {
	devs, err := mon.Devices()
	if err != nil {
		return nil, err
	}
	tw, err := datasets.NewTableWriter[datasets.GPUSample](w, datasets.TableGPUSamples, datasets.TableOptions{RowGroupRows: 4096, PartRows: 4096})
	if err != nil {
		return nil, err
	}
	s := &Sampler{mon: mon, clock: clock, tw: tw, period: period, stop: make(chan struct{}), done: make(chan error, 1)}
	go s.loop(devs)
	return s, nil
}

func (s *Sampler) loop(devs []GPUInfo) {
	t := time.NewTicker(s.period)
	defer t.Stop()
	buf := make([]datasets.GPUSample, 0, 64)
	flush := func() error {
		err := s.tw.Write(buf)
		buf = buf[:0]
		return err
	}
	for {
		for _, d := range devs {
			if smp, err := s.mon.Sample(d.Index); err == nil {
				smp.TNs = s.clock.Now()
				buf = append(buf, smp)
			}
		}
		if len(buf) >= 60 {
			if err := flush(); err != nil {
				s.done <- err
				return
			}
		}
		select {
		case <-s.stop:
			err := flush()
			if cerr := s.tw.Close(); err == nil {
				err = cerr
			}
			s.done <- err
			return
		case <-t.C:
		}
	}
}

// Stop ends sampling and closes the table.
func (s *Sampler) Stop() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		err = <-s.done
	})
	return err
}
