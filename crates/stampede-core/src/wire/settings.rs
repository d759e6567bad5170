//! The scenario's connection settings, compiled: HTTP version, connections and streams, the
//! connection policy, TLS and source addresses, as data (the engine opens connections with them).

use stampede_model::scenario::{ConnectionPolicy, HttpVersion};

use std::net::{IpAddr, Ipv4Addr};

use crate::wire::tls::TlsSettings;

/// Default most concurrent streams per HTTP/2 connection.
pub const DEFAULT_MAX_STREAMS: u32 = 100;

/// The scenario's connection settings, compiled.
#[derive(Debug, Default)]
pub struct TransportPlan {
    /// `http.version`: HTTP/1.1, HTTP/2, or `auto` (HTTP/2 when the TLS handshake agrees on it).
    pub version: HttpVersion,
    /// HTTP/2 connections per origin for the whole runner (`None`: one per worker thread).
    pub connections: Option<u32>,
    /// HTTP/2: most requests in flight at once on one connection (at least 1; default
    /// [`DEFAULT_MAX_STREAMS`]).
    pub max_streams: u32,
    /// HTTP/1.1: keep each VU's connection open, or open a new one for each iteration.
    pub policy: ConnectionPolicy,
    /// HTTP/1.1: requests after which a connection is closed (`None`: no limit).
    pub max_requests_per_connection: Option<u32>,
    /// `http.tls`: extra roots, client certificate and key, server name, `insecure`.
    pub tls: TlsSettings,
    /// `http.localAddresses`, expanded: new connections are bound to each in turn (empty: the
    /// system picks).
    pub local_addresses: Vec<IpAddr>,
}

impl TransportPlan {
    /// HTTP/2 connections per origin for worker `worker` of `threads`: an even share of
    /// `connections`, at least one.
    pub fn connections_for(&self, worker: usize, threads: usize) -> usize {
        let threads = threads.max(1);
        let total = self.connections.map_or(threads, |c| c as usize);
        (total / threads + usize::from(worker < total % threads)).max(1)
    }
}

/// Most addresses `http.localAddresses` may expand to.
pub const MAX_LOCAL_ADDRESSES: usize = 65_536;

/// Parses `http.localAddresses`: each entry an IP address or an IPv4 range `A-B` (inclusive).
/// Returns the expanded list, or `(index, reason)` for each bad entry.
pub fn parse_local_addresses(entries: &[String]) -> Result<Vec<IpAddr>, Vec<(usize, String)>> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match parse_entry(entry.trim()) {
            Ok(mut ips) => out.append(&mut ips),
            Err(reason) => bad.push((i, reason)),
        }
    }
    if bad.is_empty() && out.len() > MAX_LOCAL_ADDRESSES {
        bad.push((entries.len() - 1, format!("more than {MAX_LOCAL_ADDRESSES} addresses in all")));
    }
    if bad.is_empty() { Ok(out) } else { Err(bad) }
}

fn parse_entry(entry: &str) -> Result<Vec<IpAddr>, String> {
    let Some((from, to)) = entry.split_once('-') else {
        return entry
            .parse::<IpAddr>()
            .map(|ip| vec![ip])
            .map_err(|_| format!("`{entry}` is not an IP address or an IPv4 range `A-B`"));
    };
    let parse = |s: &str| {
        s.trim()
            .parse::<Ipv4Addr>()
            .map_err(|_| format!("`{}` in the range `{entry}` is not an IPv4 address", s.trim()))
    };
    let (from, to) = (u32::from(parse(from)?), u32::from(parse(to)?));
    if from > to {
        return Err(format!("the range `{entry}` runs backwards"));
    }
    if (to - from) as usize >= MAX_LOCAL_ADDRESSES {
        return Err(format!("the range `{entry}` holds more than {MAX_LOCAL_ADDRESSES} addresses"));
    }
    Ok((from..=to).map(|n| IpAddr::V4(Ipv4Addr::from(n))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http2_connections_are_spread_over_workers_at_least_one_each() {
        let plan = TransportPlan { connections: Some(5), ..TransportPlan::default() };
        assert_eq!((0..3).map(|w| plan.connections_for(w, 3)).collect::<Vec<_>>(), vec![2, 2, 1]);
        assert_eq!((0..4).map(|w| plan.connections_for(w, 8)).sum::<usize>(), 4);
        let default = TransportPlan::default();
        assert_eq!(default.connections_for(0, 4), 1);
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn addresses_and_inclusive_ranges_expand_in_order() {
        let ips = parse_local_addresses(&strings(&["10.0.0.1", "127.0.0.2-127.0.0.4", "::1"])).unwrap();
        let shown: Vec<String> = ips.iter().map(|ip| ip.to_string()).collect();
        assert_eq!(shown, ["10.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "::1"]);
        // A range may cross an octet.
        assert_eq!(parse_local_addresses(&strings(&["10.0.0.255-10.0.1.1"])).unwrap().len(), 3);
    }

    #[test]
    fn bad_entries_are_named_by_index_with_the_reason() {
        let bad =
            parse_local_addresses(&strings(&["127.0.0.1", "127.0.0.300", "10.0.0.9-10.0.0.1", "::1-::2"])).unwrap_err();
        let idx: Vec<usize> = bad.iter().map(|(i, _)| *i).collect();
        assert_eq!(idx, [1, 2, 3]);
        assert!(bad[0].1.contains("not an IP address"), "{}", bad[0].1);
        assert!(bad[1].1.contains("backwards"), "{}", bad[1].1);
        assert!(bad[2].1.contains("not an IPv4 address"), "{}", bad[2].1);
        let huge = parse_local_addresses(&strings(&["10.0.0.0-10.2.0.0"])).unwrap_err();
        assert!(huge[0].1.contains("more than 65536"), "{}", huge[0].1);
    }
}
