//! The `partita` binary end to end, in one test binary: the command line
//! (`cli`), `partita fuzz` (`fuzz`) and `partita serve` with the official
//! SDKs (`server`, rid-addressed links in `rid`). They live in this package because only it can name its
//! binary (`CARGO_BIN_EXE_partita`).

mod cli;
mod fuzz;
mod rid;
mod server;
