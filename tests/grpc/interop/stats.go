package main

// What the server saw of each method, from grpc-go's own stats events (a stats.Handler, so
// nothing of the TestService changes): calls (request headers read), messages received and
// sent, the bytes of their `payload.body` fields, the statuses the calls ended with, and the
// `x-*` metadata received (request headers) and sent (response headers and trailers), by
// value (base64 for `-bin` keys, as on the wire). A call to a service the server does not
// have counts as a call, but grpc-go answers it UNIMPLEMENTED without a stats event, so it
// has no status here.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

type methodStats struct {
	Calls                int64                       `json:"calls"`
	MessagesReceived     int64                       `json:"messagesReceived"`
	MessagesSent         int64                       `json:"messagesSent"`
	PayloadBytesReceived int64                       `json:"payloadBytesReceived"`
	PayloadBytesSent     int64                       `json:"payloadBytesSent"`
	Statuses             map[string]int64            `json:"statuses"`
	StatusMessages       map[string]int64            `json:"statusMessages"`
	MetadataReceived     map[string]map[string]int64 `json:"metadataReceived"`
	MetadataSent         map[string]map[string]int64 `json:"metadataSent"`
}

type recorder struct {
	mu      sync.Mutex
	methods map[string]*methodStats
}

type methodKey struct{}

func newRecorder() *recorder {
	return &recorder{methods: map[string]*methodStats{}}
}

// The canonical names of gRPC's status codes, as the gRPC docs and every client write them.
var codeNames = []string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

func (r *recorder) method(ctx context.Context) *methodStats {
	name, _ := ctx.Value(methodKey{}).(string)
	m, ok := r.methods[name]
	if !ok {
		m = &methodStats{
			Statuses:         map[string]int64{},
			StatusMessages:   map[string]int64{},
			MetadataReceived: map[string]map[string]int64{},
			MetadataSent:     map[string]map[string]int64{},
		}
		r.methods[name] = m
	}
	return m
}

func countMetadata(into map[string]map[string]int64, md metadata.MD) {
	for key, values := range md {
		if !strings.HasPrefix(key, "x-") {
			continue
		}
		for _, v := range values {
			if strings.HasSuffix(key, "-bin") {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			if into[key] == nil {
				into[key] = map[string]int64{}
			}
			into[key][v]++
		}
	}
}

func payloadBytes(message any) int64 {
	if p, ok := message.(interface{ GetPayload() *testpb.Payload }); ok {
		return int64(len(p.GetPayload().GetBody()))
	}
	return 0
}

func (r *recorder) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, strings.TrimPrefix(info.FullMethodName, "/"))
}

func (r *recorder) HandleRPC(ctx context.Context, s stats.RPCStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.method(ctx)
	switch s := s.(type) {
	case *stats.InHeader:
		m.Calls++
		countMetadata(m.MetadataReceived, s.Header)
	case *stats.InPayload:
		m.MessagesReceived++
		m.PayloadBytesReceived += payloadBytes(s.Payload)
	case *stats.OutPayload:
		m.MessagesSent++
		m.PayloadBytesSent += payloadBytes(s.Payload)
	case *stats.OutHeader:
		countMetadata(m.MetadataSent, s.Header)
	case *stats.OutTrailer:
		countMetadata(m.MetadataSent, s.Trailer)
	case *stats.End:
		st := status.Convert(s.Error)
		name := "UNKNOWN"
		if c := int(st.Code()); c < len(codeNames) {
			name = codeNames[c]
		}
		m.Statuses[name]++
		if st.Message() != "" {
			m.StatusMessages[st.Message()]++
		}
	}
}

func (r *recorder) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (r *recorder) HandleConn(context.Context, stats.ConnStats) {}

// ServeHTTP answers GET /stats with the methods' figures, by `package.Service/Method`.
func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/stats" {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(r.methods)
}
