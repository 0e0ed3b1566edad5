//! Test harness: helpers shared by the integration tests.

pub mod guest;
