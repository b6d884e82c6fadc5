//! Moving bytes: run a backend, report through counters and diagnostics.
//! The engine prints nothing.
//!
//! A copy is a reader (skip=, reads, padding: [`reader`]) feeding a writer
//! (seek=, conversions, writes, sync: [`writer`]) through a stream of
//! events; a [`backend`] decides whether the two run in turn or at once
//! (GNU's loop, a reader thread ahead of the writer, io_uring between two
//! descriptors: [`uring`], the kernel's copy: [`offload`]), in the shape
//! the planner chose ([`shape`]: bulk requests decoupled from records).
//!
//! What the reader reads and the writer writes is a [`stream`]: an end
//! seen through its [`window`], which keeps the end's requests in flight
//! (reads ahead, writes behind, an upload's parts) and owns their order,
//! the stored prefix, the first failure and back-pressure for every kind
//! of end, or a stage of the copy over another stream (`image`).
//!
//! Around them: the page cache's policy behind the copy ([`cache`]),
//! `bs=auto`'s probe ([`auto_block`]), the queue depth a device earns
//! ([`depth`]), the hand-off between threads ([`handoff`]) and the shared
//! atomic counters the progress line reads ([`counters`]).

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
