package importers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func TestAzureRealFiles(t *testing.T) {
	tests := []struct {
		file                   string
		rows                   int
		first, last            datasets.Request
		secondArrival, created string
	}{
		{
			file: azureConv, rows: 19366,
			first: datasets.Request{ReqID: "000000", ArrivalNs: 0, PromptTokens: 374, OutputTokens: 44},
			// 19:14:08.4025270 - 18:15:46.6805900
			last:    datasets.Request{ReqID: "019365", ArrivalNs: 3501_721_937_000, PromptTokens: 197, OutputTokens: 183},
			created: "2023-11-16T18:15:46.68059Z",
		},
		{
			file: azureCode, rows: 200,
			first: datasets.Request{ReqID: "000000", ArrivalNs: 0, PromptTokens: 4808, OutputTokens: 10},
			// 18:20:23.0695450 - 18:17:03.9799600
			last:    datasets.Request{ReqID: "000199", ArrivalNs: 199_089_585_000, PromptTokens: 65, OutputTokens: 10},
			created: "2023-11-16T18:17:03.97996Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rows, err := ReadRequests("azure", realFile(t, tt.file))
			require.NoError(t, err)
			require.Len(t, rows, tt.rows)
			checkRequests(t, rows, true)
			unknown := func(r datasets.Request) datasets.Request {
				r.FirstScheduledNs, r.FirstTokenNs, r.FinishNs, r.Status = -1, -1, -1, datasets.StatusNotRun
				return r
			}
			require.Equal(t, unknown(tt.first), rows[0])
			if tt.last.ReqID != "" {
				require.Equal(t, unknown(tt.last), rows[len(rows)-1])
			}
		})
	}
}

// The embedded trace, read by name from the binary, is the file it was
// built from.
func TestAzureEmbeddedMatchesFile(t *testing.T) {
	emb, err := ReadRequests("azure", "embedded:azure-conv-2023")
	require.NoError(t, err)
	require.Len(t, emb, 19366)
	require.Equal(t, int64(4_314_579_000), emb[1].ArrivalNs, "18:15:50.9951690 - 18:15:46.6805900")
	ext, err := ReadRequests("azure", realFile(t, azureConv))
	require.NoError(t, err)
	require.Equal(t, ext, emb)
}

func TestAzureParsing(t *testing.T) {
	const hdr = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	tests := []struct {
		name    string
		in      string
		want    []datasets.Request
		wantErr string
	}{
		{name: "crlf, bom, reordered columns, extra column, blank line",
			in: "\xef\xbb\xbfGeneratedTokens,TIMESTAMP,ContextTokens,Extra\r\n5,2023-11-16 18:15:46.5,10,x\r\n\r\n7,2023-11-16 18:15:47.25,20,y\r\n",
			want: []datasets.Request{
				{ReqID: "000000", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 5},
				{ReqID: "000001", ArrivalNs: 750_000_000, PromptTokens: 20, OutputTokens: 7},
			}},
		{name: "equal timestamps kept", in: hdr + "2023-11-16 18:15:46,1,1\n2023-11-16 18:15:46,2,2\n",
			want: []datasets.Request{
				{ReqID: "000000", ArrivalNs: 0, PromptTokens: 1, OutputTokens: 1},
				{ReqID: "000001", ArrivalNs: 0, PromptTokens: 2, OutputTokens: 2},
			}},
		{name: "integral float count", in: hdr + "2023-11-16 18:15:46,374.0,44\n",
			want: []datasets.Request{{ReqID: "000000", PromptTokens: 374, OutputTokens: 44}}},
		{name: "header only", in: hdr},
		{name: "not an integer", in: hdr + "2023-11-16 18:15:46,1,1\n2023-11-16 18:15:47,abc,1\n",
			wantErr: `in:3: ContextTokens: "abc" is not an integer`},
		{name: "negative", in: hdr + "2023-11-16 18:15:46,1,-4\n", wantErr: "in:2: GeneratedTokens: -4 is negative"},
		{name: "bad timestamp", in: hdr + "16/11/2023,1,1\n", wantErr: `in:2: TIMESTAMP: "16/11/2023" is not a timestamp`},
		{name: "backwards", in: hdr + "2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45.9,1,1\n",
			wantErr: "in:3: TIMESTAMP: 2023-11-16 18:15:45.9 is earlier than the previous row's 2023-11-16 18:15:46.0000000; arrivals must be in time order"},
		{name: "missing column", in: "TIMESTAMP,ContextTokens\n", wantErr: "in:1: header has no GeneratedTokens column"},
		{name: "short row", in: hdr + "2023-11-16 18:15:46,1\n", wantErr: "in:2: 2 fields, want at least 3"},
		{name: "bad quoting", in: hdr + "2023-11-16 18:15:46,\"1,1\n", wantErr: "extraneous or missing \" in quoted-field"},
		{name: "empty", in: "", wantErr: "in: empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, _, err := parseRequests("azure", []byte(tt.in), nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for i := range tt.want {
				tt.want[i].FirstScheduledNs, tt.want[i].FirstTokenNs, tt.want[i].FinishNs = -1, -1, -1
				tt.want[i].Status = datasets.StatusNotRun
			}
			if len(tt.want) == 0 {
				require.Empty(t, rows)
			} else {
				require.Equal(t, tt.want, rows)
			}
		})
	}
}

func TestAzureErrorNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/trace.csv"
	writeFile(t, p, "TIMESTAMP,ContextTokens,GeneratedTokens\n"+strings.Repeat("2023-11-16 18:15:46,1,1\n", 15)+"2023-11-16 18:15:46,abc,1\n")
	_, err := Import("azure", p, dir+"/ds", Options{})
	require.EqualError(t, err, `trace.csv:17: ContextTokens: "abc" is not an integer`)
	require.NoDirExists(t, dir+"/ds", "a failed import leaves no dataset")
}
