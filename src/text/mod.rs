//! Text as GNU dd writes it, shared by every layer that prints or explains
//! something: human-readable sizes and rates ([`human`]) and the quoting
//! of names and values in messages ([`quote`]), help text wrapped
//! beside a gutter ([`wrap`]), and moments in UTC ([`time`]). A leaf: it depends on nothing else in ddx.

pub mod human;
pub mod quote;
pub mod time;
pub mod wrap;
