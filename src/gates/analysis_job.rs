//! A job metric's measurement read back: the `batch/v1` Job sluice committed
//! (`render/analysis_job.rs`) and Flux or Argo CD applied, judged by its conditions as Argo's
//! job provider judges them: `Complete` is the value `1`, `Failed` the value `0`, anything
//! else (no condition yet, or no Job yet because the commit is not applied) no data, which
//! takes no measurement. Reads only (get on jobs.batch); the judging is pure.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value as Json;

use crate::core::observe::MetricValue;

/// The measurement a Job's status is: `1` Complete, `0` Failed, no data while it runs.
pub fn judge(job: &Json) -> MetricValue {
    let conditions = job["status"]["conditions"].as_array();
    let holds = |kind: &str| {
        conditions.is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"].as_str() == Some("True"))
        })
    };
    if holds("Failed") {
        MetricValue::Value(0.0)
    } else if holds("Complete") {
        MetricValue::Value(1.0)
    } else {
        MetricValue::NoData
    }
}

/// Reads the Job `ns`/`name` and judges it; a Job not there yet is no data, a refused or
/// failed read an Error measurement saying what sluice needs.
pub async fn read(client: &kube::Client, ns: &str, name: &str) -> MetricValue {
    let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "jobs");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    match api.get_opt(name).await {
        Ok(Some(o)) => match serde_json::to_value(o) {
            Ok(job) => judge(&job),
            Err(e) => MetricValue::Error(format!("Job {ns}/{name}: {e}")),
        },
        Ok(None) => MetricValue::NoData,
        Err(e) => MetricValue::Error(format!(
            "cannot read Job {ns}/{name}: {e}; sluice needs get on jobs.batch"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(conditions: Json) -> Json {
        json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": conditions}})
    }

    #[test]
    fn complete_is_one_failed_zero_and_running_no_data() {
        let complete = job(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(judge(&complete), MetricValue::Value(1.0));
        let failed = job(
            json!([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]),
        );
        assert_eq!(judge(&failed), MetricValue::Value(0.0));
        assert_eq!(judge(&job(json!([]))), MetricValue::NoData);
        let not_yet = job(json!([{"type": "Complete", "status": "False"}]));
        assert_eq!(judge(&not_yet), MetricValue::NoData);
        assert_eq!(judge(&json!({"kind": "Job"})), MetricValue::NoData);
    }
}
