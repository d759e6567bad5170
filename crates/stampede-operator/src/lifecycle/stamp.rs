//! Times and conditions: instants as a status writes and reads them (RFC 3339), durations of
//! the spec, and the [`Stamp`] every condition set by one decision carries.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::conditions::Cond;

pub(super) fn fmt(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub(super) fn parse(t: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(t, &Rfc3339).ok()
}

pub(super) fn duration_spec(text: Option<&str>) -> Option<Duration> {
    text.and_then(|t| stampede_model::parse_duration(t).ok())
}

/// The instant and generation every condition set by one decision carries (of a LoadTest or a
/// LoadTestSchedule).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    pub(crate) now: OffsetDateTime,
    pub(crate) generation: Option<i64>,
}

impl Stamp {
    /// Sets condition `type_` to `ok` with `reason` and `message`, keeping its transition
    /// time when its status does not change.
    pub(crate) fn set(self, conds: &mut Vec<Condition>, type_: Cond, ok: bool, reason: &str, message: &str) {
        let status = if ok { "True" } else { "False" };
        let now_time = Time(jiff_now(self.now));
        match conds.iter_mut().find(|c| c.type_ == type_.as_str()) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now_time;
                }
                c.status = status.into();
                c.reason = reason.into();
                c.message = message.into();
                c.observed_generation = self.generation;
            }
            None => conds.push(Condition {
                type_: type_.as_str().into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                last_transition_time: now_time,
                observed_generation: self.generation,
            }),
        }
    }
}

fn jiff_now(now: OffsetDateTime) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_nanosecond(now.unix_timestamp_nanos())
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

pub(super) fn condition_since(conds: &[Condition], type_: Cond) -> Option<OffsetDateTime> {
    type_
        .find(conds)
        .filter(|c| c.status == "True")
        .and_then(|c| OffsetDateTime::from_unix_timestamp_nanos(c.last_transition_time.0.as_nanosecond()).ok())
}

/// RFC 3339 with microseconds: runners start at this instant.
pub(super) fn fmt_micros(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(t.nanosecond() / 1000 * 1000).unwrap_or(t);
    fmt(t)
}
