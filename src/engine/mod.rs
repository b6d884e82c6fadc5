//! Moving bytes: open the ends, run a backend, report through counters and
//! diagnostics. The engine prints nothing.

pub mod counters;
pub mod diagnostic;
pub mod endpoints;
pub mod sync;

pub use counters::{Counters, Snapshot};
pub use diagnostic::{Diagnostic, Events};
pub use endpoints::{Endpoints, Input, Output};
pub use sync::{Outcome, RunResult, SyncCopy};
