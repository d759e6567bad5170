//! LoadTestSchedules: the decisions as a pure function ([`decide`](decide::decide), modelled on
//! the CronJob controller) and the shell that watches schedules and their LoadTests and
//! carries the decisions out ([`controller`]).

pub mod controller;
pub mod decide;

pub use decide::*;
