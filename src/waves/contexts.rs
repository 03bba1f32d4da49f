//! The kube contexts waves name (`cluster: {kubeContext: NAME}`), checked against the
//! kubeconfig sluice is given (`KUBECONFIG`, else `~/.kube/config`): a wave whose context is
//! not there is refused with its file, line and field, as any bad spec is.

use crate::core::waves::Cluster;
use crate::manifest::load::Loaded;
use crate::yaml::error::SpecError;

/// The context names of the kubeconfig sluice is given, or why it cannot be read.
pub fn kubeconfig_contexts() -> Result<Vec<String>, String> {
    let config = ::kube::config::Kubeconfig::read().map_err(|e| e.to_string())?;
    Ok(config.contexts.into_iter().map(|c| c.name).collect())
}

/// Drops every canary instance whose wave names a kube context `contexts` does not hold (every
/// instance of that canary: a release with a missing wave cannot run in order), each with an
/// error at the wave. `contexts` gives the kubeconfig's contexts ([`kubeconfig_contexts`]);
/// it is called only when some wave names a context.
pub fn reject_unknown_contexts(
    loaded: &mut Loaded,
    contexts: impl FnOnce() -> Result<Vec<String>, String>,
) {
    let names_context = |c: &crate::manifest::model::Canary| {
        c.wave
            .as_ref()
            .is_some_and(|w| matches!(w.cluster, Some(Cluster::KubeContext(_))))
    };
    if !loaded.canaries.iter().any(names_context) {
        return;
    }
    let contexts = contexts();
    let mut refused = Vec::new();
    for canary in &loaded.canaries {
        let Some(wave) = &canary.wave else { continue };
        let Some(Cluster::KubeContext(context)) = &wave.cluster else {
            continue;
        };
        let problem = match &contexts {
            Ok(names) if names.iter().any(|n| n == context) => continue,
            Ok(names) => format!(
                "no context {context:?} in the kubeconfig sluice is given (it has: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ),
            Err(e) => format!(
                "the kubeconfig sluice is given (KUBECONFIG, else ~/.kube/config) cannot be read, so context {context:?} is unknown: {e}"
            ),
        };
        loaded.errors.push(SpecError {
            file: wave.file.clone(),
            line: wave.line,
            field: format!("{}.cluster.kubeContext", wave.field),
            message: problem,
        });
        refused.push((canary.id.namespace.clone(), canary.base_name().clone()));
    }
    loaded.canaries.retain(|c| {
        c.wave.is_none() || !refused.contains(&(c.id.namespace.clone(), c.base_name().clone()))
    });
}
