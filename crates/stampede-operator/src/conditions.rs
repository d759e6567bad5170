//! The condition types the operator sets on LoadTests and LoadTestSchedules, by name: a typo
//! is a compile error, not a condition nobody waits for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// A condition type of `.status.conditions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The spec (scenario, schedule) is valid and its objects were accepted.
    Valid,
    /// The scenario's `setup` ran once and every step passed (`False`, reason `SetupFailed`:
    /// a step or its pod failed, and no load was sent).
    SetupSucceeded,
    /// The scenario's `teardown` ran once after the load and every step passed (`False`,
    /// reason `TeardownFailed`).
    TeardownSucceeded,
    /// Every runner is ready (`False` while waiting; its reason and message name a runner pod
    /// that cannot start, e.g. `ImagePullBackOff`).
    RunnersReady,
    /// The runners started together at the common instant.
    Started,
    /// A runner failed; the others' partial results are awaited.
    Stopping,
    /// `spec.abort` was set; the runners' partial results are awaited.
    Aborting,
    /// Every runner finished (`False`: the run ended another way, with the reason).
    Completed,
    /// Every threshold passed.
    ThresholdsPassed,
    /// A runner could not keep up (schedule lag or CPU): its figures are suspect.
    GeneratorSaturated,
    /// An open model's generator delivered the load the test asked for (`False`, reason
    /// `GeneratorLimited`: more than 1 % of the scheduled iterations were dropped).
    LoadDelivered,
    /// `spec.baseline` has a report to compare with.
    BaselineReady,
    /// The spec the run uses is the current one (`False`: it changed during the run).
    SpecApplied,
    /// The last `spec.live` was taken (`False`, reason `Refused`: the run cannot take it, and
    /// goes on unchanged).
    LiveChange,
    /// The run is over (`kubectl wait --for=condition=Finished`).
    Finished,
    /// The run is over and passed: every threshold met, and the asked load delivered.
    Passed,
}

impl Cond {
    /// The type as it appears in the status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cond::Valid => "Valid",
            Cond::SetupSucceeded => "SetupSucceeded",
            Cond::TeardownSucceeded => "TeardownSucceeded",
            Cond::RunnersReady => "RunnersReady",
            Cond::Started => "Started",
            Cond::Stopping => "Stopping",
            Cond::Aborting => "Aborting",
            Cond::Completed => "Completed",
            Cond::ThresholdsPassed => "ThresholdsPassed",
            Cond::GeneratorSaturated => "GeneratorSaturated",
            Cond::LoadDelivered => "LoadDelivered",
            Cond::BaselineReady => "BaselineReady",
            Cond::SpecApplied => "SpecApplied",
            Cond::LiveChange => "LiveChange",
            Cond::Finished => "Finished",
            Cond::Passed => "Passed",
        }
    }

    /// This condition in `conds`, if set.
    pub fn find(self, conds: &[Condition]) -> Option<&Condition> {
        conds.iter().find(|c| c.type_ == self.as_str())
    }

    /// Whether this condition is set to `True` in `conds`.
    pub fn is_true(self, conds: &[Condition]) -> bool {
        self.find(conds).is_some_and(|c| c.status == "True")
    }

    /// Whether this condition is set to `False` in `conds`.
    pub fn is_false(self, conds: &[Condition]) -> bool {
        self.find(conds).is_some_and(|c| c.status == "False")
    }
}

impl std::fmt::Display for Cond {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
