//! When the system's ports for a loopback target run out, new connections are spread over
//! other 127.0.0.x source addresses. Run in a network namespace of the test's own (`unshare
//! -rn`) whose ephemeral port range is cut to 64 ports, so a few thousand short connections
//! exhaust it without touching the machine's settings; the built-in target runs in that
//! namespace too, so all traffic stays on its loopback.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `stampede run FILE` inside a fresh network namespace with 64 ephemeral ports.
fn run_with_64_ports(dir: &Path, yaml: &str) -> (Value, String) {
    let file = dir.join("ports.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = dir.join("report.json");
    let script = r#"ip link set lo up && echo "40000 40063" > /proc/sys/net/ipv4/ip_local_port_range && exec "$0" run "$1" --quiet --out "$2""#;
    let run = Command::new("unshare")
        .args(["-rn", "sh", "-c", script, env!("CARGO_BIN_EXE_stampede")])
        .arg(&file)
        .arg(&out)
        .output()
        .expect("unshare (util-linux) runs: this test needs unprivileged user and network namespaces");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(0),
        "stampede in a network namespace (needs `unshare -rn` and iproute2's `ip`):\n{stdout}{stderr}"
    );
    (serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap(), stdout + &stderr)
}

fn scenario(local_addresses: &str) -> String {
    format!(
        r#"
name: ports
baseUrl: builtin
load: {{executor: constant-vus, vus: 8, iterations: 1500, duration: 60s}}
http: {{connectionPolicy: per-iteration{local_addresses}}}
scenarios:
  - name: s
    steps: [{{name: get, request: {{url: "{{{{baseUrl}}}}/get"}}}}]
"#
    )
}

#[test]
fn connections_spread_over_loopback_source_addresses_when_ports_run_out() {
    let dir = tempfile::tempdir().unwrap();
    // 1,500 connections, each closed after its iteration (TIME_WAIT holds its port), from 64
    // ports: without spreading, the connects after the first ~63 fail.
    let (report, output) = run_with_64_ports(dir.path(), &scenario(""));
    let total = &report["total"];
    assert_eq!(total["requests"], 1500, "{output}");
    assert_eq!(total["errors"], 0, "no connect failed: {}\n{output}", total["errorsByKind"]);
    let spread = report["run"]["sourceAddressesSpread"].as_u64().unwrap_or(0);
    // 1,500 connections / ~63 ports per address: at least 2 more addresses, at most the 253.
    assert!((2..=253).contains(&spread), "spread over {spread} addresses");
    assert!(output.contains("spread over"), "the table says so: {output}");
    println!("1,500 connections from 64 ports: spread over {spread} source addresses, 0 errors");

    // Pinned to one source address, the same run cannot spread: the kernel refuses the
    // connects once the ports are held, and they are counted as connect errors.
    let (report, output) = run_with_64_ports(dir.path(), &scenario(", localAddresses: [127.0.0.1]"));
    let connect = report["total"]["errorsByKind"]["connect"].as_u64().unwrap_or(0);
    assert!(connect > 0, "one source address must run out of ports: {output}");
    assert!(report["run"]["sourceAddressesSpread"].is_null());
    assert!(output.contains("from 127.0.0.1"), "the error names the source address: {output}");
    println!("pinned to 127.0.0.1: {connect} connect errors of 1,500");
}

#[test]
fn given_local_addresses_are_taken_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (report, output) = run_with_64_ports(dir.path(), &scenario(", localAddresses: [127.0.0.10-127.0.0.50]"));
    // 41 addresses × ~63 ports: room for 1,500 connections with TIME_WAIT held.
    assert_eq!(report["total"]["requests"], 1500, "{output}");
    assert_eq!(report["total"]["errors"], 0, "{output}");
    assert!(report["run"]["sourceAddressesSpread"].is_null(), "given addresses are not an automatic spread");
}
