//! Which step a figure belongs to.

/// A step's identity in results and thresholds: its scenario's name and its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StepKey {
    pub scenario: String,
    pub step: String,
}
