// Command etcd is upstream's server/main.go: the etcd server for the local e2e control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
