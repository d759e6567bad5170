pub(crate) mod executor;
