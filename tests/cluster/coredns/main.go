// CoreDNS for the real test node (tests/cluster/up.sh --node=real): the cluster DNS that makes
// `name.namespace.svc.cluster.local` resolve in pods, as in kind. Only the plugins the node's
// Corefile uses are compiled in; there is no `forward` plugin, so no query leaves the machine.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
