//! The connection settings a run opens connections with: the plan's ([`TransportPlan`], data),
//! its TLS configurations (built on first use) and its source addresses (a round-robin shared
//! by every worker thread).

use std::ops::Deref;
use std::sync::Arc;

pub(crate) use stampede_core::wire::settings::*;

use crate::client::source::SourceAddrs;
use crate::client::tls::TlsPlan;

/// One run's connection settings: the plan's, with what opening a connection needs.
#[derive(Debug, Default)]
pub(crate) struct Transport {
    pub plan: Arc<TransportPlan>,
    pub tls: TlsPlan,
    pub sources: SourceAddrs,
}

impl Transport {
    /// The run-time side of `plan`'s settings.
    pub(crate) fn new(plan: Arc<TransportPlan>) -> Transport {
        Transport { tls: TlsPlan::new(&plan.tls), sources: SourceAddrs::new(plan.local_addresses.clone()), plan }
    }
}

impl Deref for Transport {
    type Target = TransportPlan;

    fn deref(&self) -> &TransportPlan {
        &self.plan
    }
}
