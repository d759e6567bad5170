//! The LoadTest operator: pure functions compute the desired runner objects from a
//! `LoadTest` spec, a thin shell applies them and merges runner results into status.
//!
//! A skeleton until the operator issue lands.
