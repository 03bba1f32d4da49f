//! All integration tests in one binary (one link, shared helpers).

// Test code may unwrap: its panic is the failure it reports. The workspace lints (Cargo.toml)
// reject unwrap() and expect() only in the crates' production code.
// Long functions here are YAML fixtures and scenario tables: the one-screen limit of
// clippy.toml is for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod affinity_mirror;
mod alert_providers;
mod approval;
mod attacks;
mod audit;
mod autoscaler;
mod chaos;
mod cli;
mod clock_reads;
mod clone_size;
mod core_purity;
mod corpus;
mod daemon;
mod daemonset;
mod dashboard;
mod decide;
mod demo_judge;
mod demo_waves;
mod docs_links;
mod drift;
mod flagger_fields;
mod flagger_warnings;
#[path = "../git_server.rs"]
mod git_server;
mod gitops;
mod gitops_branch;
mod gitops_layers;
mod gitops_robust;
mod image;
mod input_safety;
mod install;
mod install_doc;
mod judge_approval;
mod judge_canary;
mod judge_cli;
mod judge_loop;
mod judge_providers;
mod judge_range;
mod judge_reference;
mod judge_validate;
mod kubernetes;
mod kustomize_every_router;
mod lease;
mod loop_alerts;
mod loop_appmesh;
mod loop_contour;
mod loop_git;
mod loop_gloo;
mod loop_ingress;
mod loop_istio;
mod loop_kuma;
mod loop_revert;
mod loop_traefik;
mod managed;
mod metrics;
mod module_graph;
mod no_statics;
mod notify;
mod openfunction;
mod operate;
mod per_tick;
mod rbac;
mod route;
mod route_apisix;
mod route_appmesh;
mod route_contour;
mod route_ingress;
mod route_istio;
mod route_knative;
mod route_kuma_gloo;
mod route_source;
mod route_traefik;
mod server;
mod signing_image;
mod snapshot;
mod spec_validation;
mod ssh_remote;
mod support;
mod sync;
mod tick;
mod validate_repo;
mod waves;
mod waves_run;
mod waves_spec;
mod workload;
