//! Running a plan: [`executor`] starts the worker threads and returns the outcome.

mod answer;
mod closed;
pub(crate) mod executor;
mod flow;
mod grpc;
mod iteration;
pub(crate) mod once;
mod open;
mod outcome;
mod reporter;
mod send;
mod shared;
mod socket;
mod step;
mod vu;
mod worker;
mod ws;
