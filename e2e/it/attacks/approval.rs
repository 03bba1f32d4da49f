//! See `../attacks.rs`.
