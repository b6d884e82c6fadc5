//! ddx: GNU dd rebuilt for today's disks.
//!
//! The library holds all the logic; `main.rs` only installs the signal
//! handlers and hands argv to [`cli::run`] (or [`bench::run`]).
//! Dependencies point one way, from the command line down to `sys`,
//! `text` and `stats`, with no cycle: ARCHITECTURE.md names every module,
//! the path from argv to exit status, and which layer imports which.

pub mod allocation;
pub mod bench;
pub mod casync;
pub mod cli;
pub mod copy;
pub mod diagnostic;
pub mod docs;
pub mod ends;
pub mod engine;
pub mod fuzzing;
pub mod guard;
pub mod image;
pub mod integrity;
pub mod operands;
pub mod planner;
pub mod progress;
pub mod request;
pub mod rescue;
pub mod stats;
pub mod store;
pub mod sys;
pub mod text;
pub mod transform;
