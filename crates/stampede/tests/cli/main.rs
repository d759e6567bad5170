//! The `stampede` binary's tests without a cluster, in one binary: its commands, the Grafana
//! dashboards' queries against its metrics, and loopback source-address spreading.

mod capacity;
mod commands;
mod corpus;
mod curl_parity;
mod dashboards;
mod grpc_interop;
mod hostile;
mod html_browser;
mod launch;
mod loopback_ports;
mod protocols;
mod recording;
mod replay;
mod reports;
mod seeds;
mod ws_peers;
