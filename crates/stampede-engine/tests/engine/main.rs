//! The engine's integration tests, in one binary: real runs against the built-in target and
//! small raw servers on loopback, and every example and bad-input fixture.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

mod blocks;
mod budgets;
mod common;
mod flow;
mod fuzz;
mod live;
mod open_model;
mod run;
mod scenario_files;
mod values;
