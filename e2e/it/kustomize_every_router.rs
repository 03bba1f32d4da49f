//! Every router in the registry builds with `kubectl kustomize`: for each provider string
//! `sluice::route::provider_names()` lists, a `prod/podinfo` canary runs through the loop
//! (`loop_support`) to its first step with traffic, and the output folder at main builds,
//! holding exactly the objects of its files, after initialization and at that step.
//!
//! Every provider string the registry lists needs its line in [`FIXTURES`], even when the
//! default canary is all it needs, so a router added to the registry fails here until its
//! fixture is written (and the test says so when the canary does not load).

use sluice::core::status::Phase;
use sluice::manifest::load::load;
use sluice::manifest::settings::Settings;
use sluice::yaml::snapshot::Snapshot;

use crate::support::canary::podinfo;
use crate::support::manifests::{apisix_route, CONFIGS, DEPLOYMENT};
use crate::support::manifests::{KNATIVE_SERVICE, KNATIVE_SERVICE_FILE};
use crate::support::rollout::{kustomize_builds, sluice_commits, World, CANARY_FILE, OUTPUT};

/// What a provider's canary needs beyond the default: lines under `spec:`, under
/// `service:`, the analysis, and objects it references.
struct Fixture {
    provider: &'static str,
    spec: &'static str,
    service: &'static str,
    analysis: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// The `targetRef` block, and the file (among `files`) whose `6.7.0` a new revision bumps;
    /// an empty file means the default Deployment.
    target: &'static str,
    source: &'static str,
}

const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";

const DEFAULT: Fixture = Fixture {
    provider: "",
    spec: "",
    service: "",
    analysis: STEPS,
    files: &[],
    target: DEPLOYMENT_TARGET,
    source: "",
};

const DEPLOYMENT_TARGET: &str = "  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo";
const KNATIVE_TARGET: &str = "  targetRef:
    apiVersion: serving.knative.dev/v1
    kind: Service
    name: podinfo";
const INGRESS_REF: &str = "  ingressRef:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    name: podinfo";
const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: podinfo
  namespace: prod
spec:
  ingressClassName: nginx
  rules:
    - host: app.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: podinfo
                port:
                  number: 80
";
const GATEWAY_REFS: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    hosts: [app.example.com]";
const APISIX_REF: &str = "  routeRef:
    apiVersion: apisix.apache.org/v2
    kind: ApisixRoute
    name: podinfo";

/// Every provider's canary: [`DEFAULT`] and what it needs beyond it.
const FIXTURES: &[Fixture] = &[
    Fixture {
        provider: "osm",
        ..DEFAULT
    },
    Fixture {
        provider: "linkerd",
        ..DEFAULT
    },
    Fixture {
        provider: "smi:v1alpha1",
        ..DEFAULT
    },
    Fixture {
        provider: "smi:v1alpha2",
        ..DEFAULT
    },
    Fixture {
        provider: "smi:v1alpha3",
        ..DEFAULT
    },
    Fixture {
        provider: "smi:v1alpha4",
        ..DEFAULT
    },
    Fixture {
        provider: "istio",
        ..DEFAULT
    },
    Fixture {
        provider: "istio:v1beta1",
        ..DEFAULT
    },
    Fixture {
        provider: "istio:v1",
        ..DEFAULT
    },
    Fixture {
        provider: "kuma",
        ..DEFAULT
    },
    Fixture {
        provider: "gloo",
        ..DEFAULT
    },
    Fixture {
        provider: "contour",
        ..DEFAULT
    },
    Fixture {
        provider: "traefik",
        ..DEFAULT
    },
    Fixture {
        provider: "appmesh:v1beta2",
        ..DEFAULT
    },
    Fixture {
        provider: "nginx",
        spec: INGRESS_REF,
        files: &[("apps/podinfo/ingress.yaml", INGRESS)],
        ..DEFAULT
    },
    Fixture {
        provider: "skipper",
        spec: INGRESS_REF,
        files: &[("apps/podinfo/ingress.yaml", INGRESS)],
        ..DEFAULT
    },
    Fixture {
        provider: "apisix",
        spec: APISIX_REF,
        files: &[("apps/podinfo/apisix-route.yaml", apisix_route!(80))],
        ..DEFAULT
    },
    Fixture {
        provider: "gatewayapi:v1",
        service: GATEWAY_REFS,
        ..DEFAULT
    },
    Fixture {
        provider: "gatewayapi:v1beta1",
        service: GATEWAY_REFS,
        ..DEFAULT
    },
    // The target is the Knative Service itself; the router writes it with its traffic split.
    Fixture {
        provider: "knative",
        target: KNATIVE_TARGET,
        files: &[(KNATIVE_SERVICE_FILE, KNATIVE_SERVICE)],
        source: KNATIVE_SERVICE_FILE,
        ..DEFAULT
    },
    // No route object: blue/green through the Services only.
    Fixture {
        provider: "kubernetes",
        analysis: "    iterations: 3",
        ..DEFAULT
    },
];

fn canary(provider: &str, f: &Fixture) -> String {
    podinfo()
        .provider(provider)
        .target(&format!("{}\n", f.target))
        .refs(&format!("{}\n", f.spec))
        .service(&format!(
            "    port: 80\n    targetPort: 9898\n{}",
            f.service
        ))
        .yaml(f.analysis)
}

/// The canary loads (so the loop's errors cannot be mistaken for a build failure); when it
/// does not, the message points at the fixture table.
fn check_loads(provider: &str, canary: &str, f: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = vec![
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/configs.yaml", CONFIGS),
        (CANARY_FILE, canary),
    ];
    files.extend_from_slice(f.files);
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let loaded = load(&Snapshot::read(dir.path()), &Settings::default());
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.is_empty() && loaded.canaries.len() == 1,
        "provider {provider}: the canary does not load; give it an entry in FIXTURES \
         (e2e/it/kustomize_every_router.rs): {errors:?}\n{canary}"
    );
}

/// FIXTURES and the registry name the same providers, each once: a router added to the
/// registry without a fixture fails here, without running a loop.
#[test]
fn every_registered_provider_has_a_kustomize_fixture() {
    let providers = sluice::route::provider_names();
    for f in FIXTURES {
        assert!(
            providers.contains(&f.provider),
            "FIXTURES names {:?}, which the registry does not list: {providers:?}",
            f.provider
        );
    }
    for provider in &providers {
        let count = FIXTURES.iter().filter(|f| f.provider == *provider).count();
        assert_eq!(
            count, 1,
            "provider {provider}: expected one line in FIXTURES (e2e/it/kustomize_every_router.rs), found {count}"
        );
    }
}

#[test]
fn every_routers_output_folder_builds_with_kubectl_kustomize() {
    let providers = sluice::route::provider_names();
    // A few at a time: each provider's loop is mostly waiting on git and kubectl. Every
    // provider runs even when one fails, and the failure names each provider with its panic
    // (a scoped thread's panic alone says only "a scoped thread panicked").
    let mut failed = Vec::new();
    for chunk in providers.chunks(4) {
        std::thread::scope(|scope| {
            let running: Vec<_> = chunk
                .iter()
                .map(|&provider| {
                    let thread = std::thread::Builder::new()
                        .name(format!("provider {provider}"))
                        .spawn_scoped(scope, move || builds_through_the_loop(provider))
                        .unwrap();
                    (provider, thread)
                })
                .collect();
            for (provider, thread) in running {
                if let Err(panic) = thread.join() {
                    failed.push(format!("provider {provider}: {}", panic_text(&*panic)));
                }
            }
        });
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(text), _) => text.clone(),
        (None, Some(text)) => (*text).to_string(),
        (None, None) => "a panic without a message".to_string(),
    }
}

/// `provider`'s canary runs to its first step with traffic; the output folder builds after
/// initialization, when the new revision starts progressing, and at that step.
fn builds_through_the_loop(provider: &str) {
    let f = FIXTURES
        .iter()
        .find(|f| f.provider == provider)
        .unwrap_or_else(|| panic!("provider {provider}: no line in FIXTURES"));
    let text = canary(provider, f);
    check_loads(provider, &text, f);
    let mut w = World::with_files(&text, f.files);
    // `until` builds the output folder once the phase is committed.
    w.until(Phase::Initialized);
    match f.files.iter().find(|(path, _)| *path == f.source) {
        Some((path, text)) => {
            w.human_writes(path, &text.replace("6.7.0", "6.7.1"), "podinfo: 6.7.1")
        }
        None => w.new_revision("6.7.1"),
    }
    w.until(Phase::Progressing);
    let mut at_step = false;
    for _ in 0..50 {
        let weights = sluice_commits(&w.bare).pop().map(|(_, t)| t);
        if weights.is_some_and(|t| !t.ends_with(" canary=0")) {
            at_step = true;
            break;
        }
        w.tick();
    }
    assert!(
        at_step,
        "provider {provider}: no traffic reached the canary"
    );
    kustomize_builds(&w.bare, OUTPUT);
}
