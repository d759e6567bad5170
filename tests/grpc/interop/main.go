// A gRPC server that is not ours, for the gRPC steps' tests: grpc-go's interop TestService
// (google.golang.org/grpc/interop), as grpc-go itself serves it. With -write-protos DIR it
// writes the service's .proto files there (printed from the descriptors grpc-go compiled in)
// and exits; otherwise it serves on -addr and prints the address it listens on. It offers
// server reflection (grpc-go's reflection package) for the steps that ask for it, unless
// -no-reflection. With -stats-addr it also serves, on that (loopback) address, `GET /stats`:
// what grpc-go's own stats events saw of each method (see stats.go), and prints `stats ADDR`
// as its second line.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/jhump/protoreflect/desc"
	"github.com/jhump/protoreflect/desc/protoprint"
	"google.golang.org/grpc"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (loopback)")
	protos := flag.String("write-protos", "", "write the TestService's .proto files into this folder and exit")
	noReflection := flag.Bool("no-reflection", false, "do not offer server reflection")
	statsAddr := flag.String("stats-addr", "", "serve GET /stats (JSON) on this loopback address")
	flag.Parse()
	if *protos != "" {
		writeProtos(*protos)
		return
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lis.Addr().String())
	rec := newRecorder()
	if *statsAddr != "" {
		statsLis, err := net.Listen("tcp", *statsAddr)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stats " + statsLis.Addr().String())
		go func() { log.Fatal(http.Serve(statsLis, rec)) }()
	}
	os.Stdout.Sync()
	s := grpc.NewServer(grpc.StatsHandler(rec))
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer())
	if !*noReflection {
		reflection.Register(s)
	}
	log.Fatal(s.Serve(lis))
}

func writeProtos(dir string) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName("grpc.testing.TestService")
	if err != nil {
		log.Fatal(err)
	}
	file, err := desc.WrapFile(d.ParentFile())
	if err != nil {
		log.Fatal(err)
	}
	files := []*desc.FileDescriptor{file}
	for _, dep := range file.GetDependencies() {
		files = append(files, dep)
	}
	p := protoprint.Printer{}
	if err := p.PrintProtosToFileSystem(files, dir); err != nil {
		log.Fatal(err)
	}
	fmt.Println(file.GetName())
}
