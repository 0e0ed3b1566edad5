//! The blog workload of `shared/reference/blog-scenario.md`, shared by the
//! demo (`partita demo`), the benchmark harness and the tests: its native
//! Rust transactions ([`blog`], the baseline the script runtimes are
//! measured against) and the builder of its Rust guest modules ([`guest`]).
//!
//! Unpublished: users depend on the `partita` facade, never on this crate.

pub mod blog;
pub mod guest;
pub mod js;
