//! The common start instant: reading and writing it (RFC 3339 with microseconds) and waiting
//! for it precisely.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The last stretch before the start instant, which the runner spins through instead of sleeping.
const SPIN_MARGIN: Duration = Duration::from_millis(2);

/// A `status.startAt` that is not an RFC 3339 time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct StartAtError(String);

/// Parses `status.startAt` (RFC 3339).
pub(crate) fn parse_start_at(s: &str) -> Result<SystemTime, StartAtError> {
    OffsetDateTime::parse(s.trim(), &Rfc3339)
        .map(SystemTime::from)
        .map_err(|e| StartAtError(format!("status.startAt {s:?} is not an RFC 3339 time: {e}")))
}

/// How long to wait from `now` until `start_at` (zero when it has passed).
pub(crate) fn start_delay(start_at: SystemTime, now: SystemTime) -> Duration {
    start_at.duration_since(now).unwrap_or(Duration::ZERO)
}

/// RFC 3339 in UTC with microseconds, e.g. `2025-01-02T03:04:05.678901Z`.
pub(crate) fn format_micros(t: SystemTime) -> String {
    let t = OffsetDateTime::from(t).to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// `a - b` in µs, negative when `a` is earlier.
pub(crate) fn signed_micros(a: SystemTime, b: SystemTime) -> i64 {
    match a.duration_since(b) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// Sleeps until `target` on this (blocking) thread, spinning the last [`SPIN_MARGIN`] for
/// precision. False when `interrupt` was set first.
pub(crate) fn wait_precisely(target: Instant, interrupt: &AtomicBool) -> bool {
    loop {
        if interrupt.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= target {
            return true;
        }
        let left = target - now;
        if left > SPIN_MARGIN {
            std::thread::sleep((left - SPIN_MARGIN).min(Duration::from_millis(20)));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_instant_parses_rfc3339_and_waits_only_for_the_future() {
        let t = parse_start_at("2030-01-02T03:04:05.250Z").unwrap();
        let same = parse_start_at("2030-01-02T05:04:05.25+02:00").unwrap();
        assert_eq!(t, same);
        assert_eq!(start_delay(t, t - Duration::from_millis(1500)), Duration::from_millis(1500));
        assert_eq!(start_delay(t, t + Duration::from_secs(3)), Duration::ZERO, "past: start at once");
        assert_eq!(start_delay(t, t), Duration::ZERO);
        assert!(parse_start_at("tomorrow").unwrap_err().to_string().contains("startAt"));
        assert!(parse_start_at("2030-01-02 03:04:05").is_err());
    }

    #[test]
    fn start_instants_are_written_with_microseconds_and_read_back_exactly() {
        let t = parse_start_at("2030-01-02T03:04:05.123456Z").unwrap();
        assert_eq!(format_micros(t), "2030-01-02T03:04:05.123456Z");
        let whole = parse_start_at("2030-01-02T03:04:05Z").unwrap();
        assert_eq!(format_micros(whole), "2030-01-02T03:04:05.000000Z");
        let now = SystemTime::now();
        let back = parse_start_at(&format_micros(now)).unwrap();
        assert!(signed_micros(now, back).abs() <= 1);
        assert_eq!(signed_micros(whole, t), -123_456);
    }

    #[test]
    fn precise_wait_never_starts_early_and_stops_when_interrupted() {
        let flag = AtomicBool::new(false);
        let target = Instant::now() + Duration::from_millis(30);
        assert!(wait_precisely(target, &flag));
        // Never early; how little late is a matter of the machine's load (see the e2e notes).
        assert!(Instant::now() >= target);
        flag.store(true, Ordering::Relaxed);
        assert!(!wait_precisely(Instant::now() + Duration::from_secs(60), &flag));
    }
}
