//! The scenario's connection settings, compiled: HTTP version, connections and streams, the
//! connection policy, TLS and source addresses.

use stampede_model::scenario::{ConnectionPolicy, HttpVersion};

use crate::client::source::SourceAddrs;
use crate::client::tls::TlsPlan;

/// Default most concurrent streams per HTTP/2 connection.
pub(crate) const DEFAULT_MAX_STREAMS: u32 = 100;

/// The scenario's connection settings, compiled.
#[derive(Debug, Default)]
pub struct TransportPlan {
    pub version: HttpVersion,
    /// HTTP/2 connections per origin for the whole runner (`None`: one per worker thread).
    pub connections: Option<u32>,
    pub max_streams: u32,
    pub policy: ConnectionPolicy,
    pub max_requests_per_connection: Option<u32>,
    pub tls: TlsPlan,
    /// Source addresses of new connections.
    pub sources: SourceAddrs,
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
}
