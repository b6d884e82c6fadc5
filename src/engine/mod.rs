//! Moving bytes: open the ends, run a backend, report through counters and
//! diagnostics. The engine prints nothing.
//!
//! A copy is a reader (skip=, reads, padding: [`reader`]) feeding a writer
//! (seek=, conversions, writes, sync: [`writer`]) through a stream of
//! events; a [`backend`] decides whether the two run in turn or at once.

pub mod auto_block;
pub mod backend;
pub mod cache;
pub mod counters;
pub mod depth;
pub mod handoff;
pub mod offload;
pub mod reader;
pub mod shape;
pub mod stream;
pub mod uring;
pub mod window;
pub mod writer;

pub use backend::{Backend, Shaping, DEFAULT_QUEUE_DEPTH};
pub use counters::{Counters, Snapshot};
pub use writer::{Outcome, RunResult};
