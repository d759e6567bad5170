//! The `LoadTest` custom resource (group `stampede.dev`, version `v1alpha1`).
//!
//! A skeleton until the operator issue lands: the CRD types, their status and the
//! `crdgen` output will live here, built on the engine's scenario and summary types.
