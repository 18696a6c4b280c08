//! The QBETS prediction engine (Nurmi, Brevik & Wolski), as fixed by `qbets.md`.
//!
//! Pure computation: may import std, serde, statrs and the crate's domain types only —
//! no I/O, no clock; every operation takes the time it speaks for as an argument.
