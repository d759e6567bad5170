//! The generator watches itself: CPU time (process and per thread) and peak RSS.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};

/// CPU time and peak memory at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub user: Duration,
    pub system: Duration,
    /// Peak resident set size in bytes (process-wide).
    pub max_rss_bytes: u64,
}

impl Usage {
    pub(crate) fn cpu(&self) -> Duration {
        self.user + self.system
    }
}

fn read(who: UsageWho) -> Usage {
    match getrusage(who) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec().max(0) as u64) + Duration::from_micros(t.tv_usec().max(0) as u64)
            };
            Usage {
                user: tv(u.user_time()),
                system: tv(u.system_time()),
                // getrusage's maxrss survives exec: under `cargo run` it reports cargo's own
                // peak. VmHWM belongs to this program's address space only.
                max_rss_bytes: peak_rss_bytes().unwrap_or((u.max_rss().max(0) as u64) * 1024),
            }
        }
        Err(_) => Usage::default(),
    }
}

/// Usage of the whole process so far.
pub(crate) fn process() -> Usage {
    read(UsageWho::RUSAGE_SELF)
}

/// CPU time of the calling thread so far.
pub(crate) fn this_thread() -> Usage {
    read(UsageWho::RUSAGE_THREAD)
}

/// Peak resident set size of this process image (VmHWM), in bytes.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    proc_status_kb("VmHWM:").map(|kb| kb * 1024)
}

/// Resident set size now (VmRSS), in bytes.
pub(crate) fn current_rss_bytes() -> Option<u64> {
    proc_status_kb("VmRSS:").map(|kb| kb * 1024)
}

fn proc_status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Raises the soft limit on open files towards the hard limit when `wanted` descriptors
/// need more than the soft limit allows; returns the soft limit now in force.
pub(crate) fn raise_open_files(wanted: u64) -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return u64::MAX };
    if wanted <= soft || hard <= soft {
        return soft;
    }
    let raised = hard.min(wanted.max(soft));
    match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
        Ok(()) => raised,
        Err(_) => soft,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::resource::{Resource, getrlimit};

    #[test]
    fn the_open_file_limit_is_raised_up_to_the_hard_limit_only() {
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(raise_open_files(1), soft, "enough already: unchanged");
        let now = raise_open_files(u64::MAX);
        assert!(now >= soft && now <= hard, "{now} within {soft}..={hard}");
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap().0, now);
    }
}
