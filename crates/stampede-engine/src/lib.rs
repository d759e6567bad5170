//! Stampede's load engine.
