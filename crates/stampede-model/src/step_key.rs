//! Which step a figure belongs to.

/// A step's identity in results and thresholds: its scenario's name and its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StepKey {
    /// Name of the step's scenario (`init`, `setup` or `teardown` for those steps).
    pub scenario: String,
    /// The step's name (a group's name for a group's transaction).
    pub step: String,
}
