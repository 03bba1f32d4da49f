//! Gate adapters: calls to external systems whose answers gate a canary (webhooks). They
//! return observations; the core decides what the answers mean.

pub mod webhook;
