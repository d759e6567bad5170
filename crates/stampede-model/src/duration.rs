//! Human-friendly durations (`500ms`, `30s`, `2m`, `1h30m`) for scenario files.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text with a unit, e.g. `250ms`, `30s`, `2m`, `1h30m`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    /// A duration of `secs` whole seconds.
    pub fn from_secs(secs: u64) -> Self {
        Dur(Duration::from_secs(secs))
    }

    /// The duration it holds.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Whether it is zero long (`0`, `0s`, `0ms`…).
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for Dur {
    fn from(d: Duration) -> Self {
        Dur(d)
    }
}

/// A duration that does not parse: the text and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration `{text}`: {reason}")]
pub struct DurationError {
    /// The text that did not parse, without surrounding whitespace.
    pub text: String,
    /// Why it did not parse, e.g. `must not be negative`.
    pub reason: String,
}

impl DurationError {
    fn negative(text: &str) -> Self {
        DurationError { text: text.to_string(), reason: "must not be negative".into() }
    }
}

/// Parses `250ms`, `30s`, `2m`, `1h30m`, `1.5s`. A bare `0` means zero.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if let Some(secs) = text.strip_suffix('s').and_then(|n| n.parse::<f64>().ok())
        && !text.ends_with("ms")
        && !text.ends_with("us")
        && !text.ends_with("ns")
    {
        if secs < 0.0 {
            return Err(DurationError::negative(text));
        }
        // Past `u64::MAX` seconds (or infinite, or NaN) is no duration.
        return Duration::try_from_secs_f64(secs).map_err(|_| DurationError {
            text: text.to_string(),
            reason: format!(
                "{}; write a number with a unit, e.g. 500ms, 30s, 2m, 1h30m",
                if secs.is_nan() { "not a number" } else { "too long" }
            ),
        });
    }
    if text.starts_with('-') {
        return Err(DurationError::negative(text));
    }
    humantime::parse_duration(text).map_err(|e| DurationError {
        text: text.to_string(),
        reason: format!("{e}; write a number with a unit, e.g. 500ms, 30s, 2m, 1h30m"),
    })
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d.subsec_nanos() == 0 {
            let s = d.as_secs();
            if s.is_multiple_of(3600) {
                return write!(f, "{}h", s / 3600);
            }
            if s.is_multiple_of(60) {
                return write!(f, "{}m", s / 60);
            }
            return write!(f, "{s}s");
        }
        if d.subsec_nanos().is_multiple_of(1_000_000) {
            return write!(f, "{}ms", d.as_millis());
        }
        write!(f, "{}us", d.as_micros())
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with a unit, e.g. 500ms, 30s, 2m")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(Duration::ZERO))
                } else {
                    Err(E::custom(format!("duration `{v}` has no unit; write e.g. {v}s or {v}ms")))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                if v < 0 {
                    Err(E::custom(format!("invalid duration `{v}`: must not be negative")))
                } else {
                    self.visit_u64(v as u64)
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!("duration `{v}` has no unit; write e.g. {v}s or {v}ms")))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration with a unit: 500ms, 30s, 2m, 1h30m.",
            "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h)\\s*)+$|^0$",
            "examples": ["500ms", "30s", "2m"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_garbage_and_negatives() {
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-3s").unwrap_err().to_string().contains("negative"));
        assert!(parse_duration("10").is_err());
    }

    /// Found by fuzzing (`load.duration: 99999999999999999999s` panicked in
    /// `Duration::from_secs_f64`): seconds past what a duration holds are refused, not a panic.
    #[test]
    fn seconds_past_what_a_duration_holds_are_refused_with_a_reason() {
        for text in ["99999999999999999999s", "1e300s", "infs", "18446744073709551616s"] {
            let e = parse_duration(text).unwrap_err();
            assert_eq!(e.text, text);
            assert!(e.reason.starts_with("too long"), "{text}: {e}");
        }
        assert!(parse_duration("NaNs").unwrap_err().reason.starts_with("not a number"));
        assert_eq!(parse_duration("9999999999s").unwrap(), Duration::from_secs(9_999_999_999));
        assert_eq!(parse_duration("-0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn displays_round_trip() {
        for s in ["30s", "2m", "1h", "250ms"] {
            assert_eq!(Dur(parse_duration(s).unwrap()).to_string(), s);
        }
    }
}
