//! What the user sees while and after copying: GNU's statistics and
//! progress lines, printed by a reporter that the copy loop never waits on.

pub mod json;
pub mod live;
pub mod rate;
pub mod reporter;
pub mod stats;
pub mod ticker;

pub use reporter::Reporter;
pub use ticker::Ticker;
