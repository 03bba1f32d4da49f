//! Metric and webhook adapters against real local servers: canned HTTP answers, webhooks, and
//! a real Prometheus (end to end), the vendor providers against fakes of their APIs. One binary, shared helpers in `support`.

mod argo_analysis;
mod argo_web;
mod loop_e2e;
mod observe;
mod pooling;
mod prometheus_canned;
pub mod prometheus_e2e;
pub mod providers;
pub mod providers_signed;
pub mod vendor_loop;
mod webhooks;
