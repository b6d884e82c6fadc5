//! ddx: GNU dd rebuilt for today's disks.
//!
//! The library holds all the logic; `main.rs` only installs the signal
//! handlers and hands argv to [`cli::run`]. Dependencies point one way:
//! `cli` → `operands`, `engine`, `progress`; `engine` → `transform`, `sys`.

pub mod bench;
pub mod cli;
pub mod engine;
pub mod guard;
pub mod operands;
pub mod progress;
pub mod quote;
pub mod sys;
pub mod transform;
