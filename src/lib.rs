//! ddx: GNU dd rebuilt for today's disks.
//!
//! The library holds all the logic; `main.rs` only installs the signal
//! handlers and hands argv to [`cli::run`]. Dependencies point one way:
//! `cli` → `operands`, `engine`, `progress`; `engine` → `transform`, `sys`.

pub mod bench;
pub mod cli;
pub mod copy;
pub mod ends;
pub mod engine;
pub mod guard;
pub mod image;
pub mod integrity;
pub mod operands;
pub mod planner;
pub mod progress;
pub mod request;
pub mod rescue;
pub mod stats;
pub mod sys;
pub mod text;
pub mod transform;
