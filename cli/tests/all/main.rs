//! The `partita` binary end to end, in one test binary: the command line
//! (`cli`), `partita fuzz` (`fuzz`), the Data Explorer in a browser
//! (`explorer`), `partita serve` with the official
//! SDKs (`server`, rid-addressed links in `rid`, clients that try to hold
//! it in `hostile_http`, the hostile script corpus in `hostile`, a disk
//! that fills up in `hostile_disk`), and the Python SDK's own emulator
//! tests against it (`sdk_suite`), several `partita serve` nodes on one
//! PostgreSQL database killed under load (`nodes`), with what the server
//! tests share in
//! `support`. They live in this package because only it can name
//! its binary (`CARGO_BIN_EXE_partita`).

mod cli;
mod explorer;
mod fuzz;
mod hostile;
mod hostile_disk;
mod hostile_http;
mod nodes;
mod permissions;
mod rid;
mod sdk_suite;
mod server;
mod support;
