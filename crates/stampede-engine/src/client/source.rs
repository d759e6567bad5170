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
/// The runner's source addresses: the configured ones, or the loopback spread once ports ran
/// out. Shared by every worker thread; touched only when a connection is opened.
#[derive(Debug, Default)]
pub(crate) struct SourceAddrs {
    /// `http.localAddresses`, expanded; empty: the system picks.
    fixed: Vec<IpAddr>,
    /// The loopback spread is on.
    spreading: AtomicBool,
    /// Round-robin cursor over `fixed` or the spread.
    next: AtomicUsize,
}

impl SourceAddrs {
    pub(crate) fn new(fixed: Vec<IpAddr>) -> SourceAddrs {
        SourceAddrs { fixed, ..SourceAddrs::default() }
    }

    /// How many loopback source addresses connections were spread over after the system's
    /// ports ran out (0: they did not run out, or `http.localAddresses` was given).
    pub(crate) fn spread_over(&self) -> usize {
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
    pub(crate) async fn connect(&self, dest: SocketAddr) -> io::Result<TcpStream> {
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
