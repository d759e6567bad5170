//! The `stampede` binary's tests without a cluster, in one binary: its commands, the Grafana
//! dashboards' queries against its metrics, and loopback source-address spreading.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

mod capacity;
mod cdp;
mod commands;
mod corpus;
mod curl_parity;
mod dashboards;
mod grpc_interop;
mod hostile;
mod html_browser;
mod import_commands;
mod launch;
mod live_dashboard;
mod loopback_ports;
mod protocols;
mod recording;
mod replay;
mod report_commands;
mod reports;
mod seeds;
mod target_commands;
mod ws_peers;
