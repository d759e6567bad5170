//! The engine's integration tests, in one binary: real runs against the built-in target and
//! small raw servers on loopback, and every example and bad-input fixture.

mod blocks;
mod budgets;
mod common;
mod flow;
mod fuzz;
mod open_model;
mod run;
mod scenario_files;
mod values;
