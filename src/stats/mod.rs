//! Statistics over measurements, shared by `ddx bench` and `bs=auto`: the
//! block-size rule and the estimates it rests on ([`recommend`]). A leaf:
//! it depends on nothing else in ddx.

pub mod recommend;
