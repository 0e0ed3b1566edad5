//! Nothing here: the acceptance test lives in `tests/sdk.rs`.
