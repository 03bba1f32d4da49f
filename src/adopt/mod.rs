//! The switch of a repo from Flagger to sluice. [`check`]: whether each step of the switch is
//! safe to take, decided over facts the CLI observed (pure).

pub mod check;
