//! `--max-operations` and `--max-instructions`: a call cut short from
//! outside, as Cosmos DB cuts a script short when its time or request units
//! run low, so a user can test a script's continuation path.

use clap::Args;
use partita::{ExecutionCaps, Limits};

/// Caps on one call's bounded execution.
#[derive(Args, Clone, Copy, Debug, Default)]
pub(crate) struct CapArgs {
    /// Accept at most N collection operations; later ones return false and
    /// their callbacks never run (bounded execution).
    #[arg(long, value_name = "N")]
    max_operations: Option<u64>,
    /// Accept collection operations only until N JavaScript instructions
    /// (or units of WebAssembly fuel) have run.
    #[arg(long, value_name = "N")]
    max_instructions: Option<u64>,
}

impl CapArgs {
    /// `limits` with these caps applied.
    pub(crate) fn apply(self, limits: &Limits) -> Limits {
        limits.clone().capped(ExecutionCaps {
            max_operations: self.max_operations,
            max_instructions: self.max_instructions,
        })
    }
}
