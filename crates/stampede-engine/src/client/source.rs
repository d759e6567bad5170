//! Source addresses of new connections.
//!
//! A TCP connection is told apart from the others by its 4-tuple, so one source address can
//! hold only as many connections to one `ip:port` as there are ephemeral ports (about 28,000
//! by default on Linux), fewer while closed connections sit in TIME_WAIT. Two ways past that:
//!
//! - `http.localAddresses` (like k6's `--local-ips`): every new connection is bound to the
//!   next of these addresses in turn.
//! - Without it, when the target is on `127.0.0.0/8` and the system has no port left for a
//!   connect (`EADDRNOTAVAIL`), connections from then on are spread over the source addresses
//!   127.0.0.2–127.0.0.254, which every Linux loopback answers on. The report says so.
//!
//! Bound sockets set `IP_BIND_ADDRESS_NO_PORT`, so the port is picked at connect time per
//! 4-tuple rather than reserved per address at bind time.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::net::{TcpSocket, TcpStream};

/// Loopback source addresses used once the system's ports for one ran out.
const SPREAD_FIRST: u8 = 2;
const SPREAD_LAST: u8 = 254;
/// Most addresses tried for one connect when each says it has no port left.
const TRIES: usize = 4;
/// Most addresses `http.localAddresses` may expand to.
pub(crate) const MAX_LOCAL_ADDRESSES: usize = 65_536;

/// Parses `http.localAddresses`: each entry an IP address or an IPv4 range `A-B` (inclusive).
/// Returns the expanded list, or `(index, reason)` for each bad entry.
pub(crate) fn parse_local_addresses(entries: &[String]) -> Result<Vec<IpAddr>, Vec<(usize, String)>> {
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

/// The runner's source addresses: the configured ones, or the loopback spread once ports ran
/// out. Shared by every worker thread; touched only when a connection is opened.
#[derive(Debug, Default)]
pub struct SourceAddrs {
    /// `http.localAddresses`, expanded; empty: the system picks.
    fixed: Vec<IpAddr>,
    /// The loopback spread is on.
    spreading: AtomicBool,
    /// Round-robin cursor over `fixed` or the spread.
    next: AtomicUsize,
}

impl SourceAddrs {
    pub fn new(fixed: Vec<IpAddr>) -> SourceAddrs {
        SourceAddrs { fixed, ..SourceAddrs::default() }
    }

    /// How many loopback source addresses connections were spread over after the system's
    /// ports ran out (0: they did not run out, or `http.localAddresses` was given).
    pub fn spread_over(&self) -> usize {
        if self.spreading.load(Ordering::Relaxed) { self.next.load(Ordering::Relaxed).min(spread_len()) } else { 0 }
    }

    /// The address the next connection to `dest` is bound to, if any.
    fn pick(&self, dest: SocketAddr) -> Option<IpAddr> {
        if !self.fixed.is_empty() {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            return Some(self.fixed[i % self.fixed.len()]);
        }
        if spreadable(dest) && self.spreading.load(Ordering::Relaxed) {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            return Some(spread_addr(i));
        }
        None
    }

    /// Connects to `dest` from the next source address; on a loopback target whose ports ran
    /// out, turns the spread on and tries a few spread addresses.
    pub async fn connect(&self, dest: SocketAddr) -> io::Result<TcpStream> {
        let mut result = connect_from(dest, self.pick(dest)).await;
        let mut tries = 0;
        while let Err(e) = &result
            && e.kind() == io::ErrorKind::AddrNotAvailable
            && self.fixed.is_empty()
            && spreadable(dest)
            && tries < TRIES
        {
            if !self.spreading.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "no local port left for connections to {dest}: spreading new connections over the source \
                     addresses 127.0.0.{SPREAD_FIRST}-127.0.0.{SPREAD_LAST}"
                );
            }
            tries += 1;
            result = connect_from(dest, self.pick(dest)).await;
        }
        result
    }
}

fn spreadable(dest: SocketAddr) -> bool {
    matches!(dest.ip(), IpAddr::V4(ip) if ip.is_loopback())
}

fn spread_len() -> usize {
    usize::from(SPREAD_LAST - SPREAD_FIRST) + 1
}

fn spread_addr(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, SPREAD_FIRST + (i % spread_len()) as u8))
}

async fn connect_from(dest: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(source) = source else { return TcpStream::connect(dest).await };
    let socket = if dest.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    #[cfg(target_os = "linux")]
    {
        use nix::sys::socket::{setsockopt, sockopt::IpBindAddressNoPort};
        // Best effort: without it, bind reserves a port per address (still ~28,000 each).
        let _ = setsockopt(&socket, IpBindAddressNoPort, &true);
    }
    socket.bind(SocketAddr::new(source, 0)).map_err(|e| io::Error::new(e.kind(), format!("bind to {source}: {e}")))?;
    socket.connect(dest).await.map_err(|e| io::Error::new(e.kind(), format!("from {source}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn fixed_addresses_go_round_robin_and_the_spread_only_serves_loopback_v4() {
        let dest: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let fixed = SourceAddrs::new(vec!["127.0.0.7".parse().unwrap(), "127.0.0.8".parse().unwrap()]);
        let picks: Vec<_> = (0..3).map(|_| fixed.pick(dest).unwrap().to_string()).collect();
        assert_eq!(picks, ["127.0.0.7", "127.0.0.8", "127.0.0.7"]);
        assert_eq!(fixed.spread_over(), 0);

        let auto = SourceAddrs::default();
        assert_eq!(auto.pick(dest), None, "the system picks until ports run out");
        auto.spreading.store(true, Ordering::Relaxed);
        assert_eq!(auto.pick(dest), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(auto.pick("[::1]:80".parse().unwrap()), None);
        assert_eq!(auto.pick("10.1.2.3:80".parse().unwrap()), None);
        for _ in 0..1000 {
            auto.pick(dest);
        }
        assert_eq!(auto.spread_over(), 253, "at most 127.0.0.2-254");
        assert_eq!(spread_addr(252), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 254)));
        assert_eq!(spread_addr(253), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    }

    #[tokio::test]
    async fn a_bound_connection_comes_from_its_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dest = listener.local_addr().unwrap();
        let sources = SourceAddrs::new(vec!["127.0.0.9".parse().unwrap()]);
        let (client, accepted) = tokio::join!(sources.connect(dest), listener.accept());
        let (_, peer) = accepted.unwrap();
        assert_eq!(client.unwrap().local_addr().unwrap().ip(), peer.ip());
        assert_eq!(peer.ip().to_string(), "127.0.0.9");
    }
}
