//! What a HelmRelease says of its objects, put on the release for each of them: the marks
//! of the Kustomization that rendered it, its service account, `suspend`, and
//! `driftDetection` as driftless's drift policies.

use serde_json::Value;

use crate::hydrate::flux::model::{HelmReleaseSpec, is_flux_controller};
use crate::hydrate::not_carried_out::NotCarriedOut;

/// The marks on the HelmRelease that hold for its objects; its wave.
pub(super) fn marks(
    v: &Value,
    spec: &HelmReleaseSpec,
    ns: &str,
    name: &str,
    release: &mut crate::spec::helm::HelmRelease,
) -> i32 {
    // The marks the Kustomization that rendered it put on it (its wave, prune, force)
    // hold for every object of the release.
    let mut wave = 0;
    for (k, value) in v["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if let (true, Some(value)) = (k.starts_with("driftless.dev/"), value.as_str()) {
            if k == crate::spec::order::WAVE {
                wave = value.trim().parse().unwrap_or(0);
            } else {
                release.annotations.insert(k.clone(), value.to_string());
            }
        }
    }
    // Flux impersonates it for the release's objects: driftless writes only what it may
    // (over the account of the Kustomization that rendered the HelmRelease).
    if let Some(account) = spec
        .service_account_name
        .as_deref()
        .filter(|a| !is_flux_controller(ns, a))
    {
        release.annotations.insert(
            crate::spec::policy::SERVICE_ACCOUNT.to_string(),
            format!("{ns}/{account}"),
        );
    }
    if spec.suspend == Some(true) {
        release.annotations.insert(
            crate::spec::policy::SUSPEND.to_string(),
            format!("Flux HelmRelease {ns}/{name} is suspended (suspend: true)"),
        );
    }
    wave
}

/// `driftDetection` as driftless's drift policies: `enabled` corrects drift as driftless
/// does; `warn` and `disabled` (Flux's default, which leaves a changed object as it is)
/// report it and write nothing; each `ignore` rule's paths are left to others on the
/// objects its target selects. What cannot be carried out: the key at fault and why.
pub(super) fn drift_detection(
    dd: &Value,
    release: &mut crate::spec::helm::HelmRelease,
) -> Result<(), (&'static str, String)> {
    use crate::spec::policy::{DRIFT, check_pointer};
    match dd["mode"].as_str().unwrap_or("disabled") {
        "enabled" => {}
        "warn" | "disabled" => {
            release
                .annotations
                .insert(DRIFT.to_string(), "report".to_string());
        }
        other => {
            return Err((
                "driftDetection",
                format!("`driftDetection.mode: {other}` is none of enabled, warn, disabled"),
            ));
        }
    }
    for rule in dd["ignore"].as_array().into_iter().flatten() {
        let target = &rule["target"];
        if let Some(key) = ["labelSelector", "annotationSelector"]
            .into_iter()
            .find(|k| target.get(*k).is_some())
        {
            return Err((
                "target",
                NotCarriedOut::field(format!("driftDetection.ignore[].target.{key}")).to_string(),
            ));
        }
        let part = |key: &str| -> Result<Option<String>, (&'static str, String)> {
            match target[key].as_str() {
                // A kustomize selector's name is a regular expression: a plain name only.
                Some(v) if v.contains(|c: char| "^$*+?()[]{}|\\".contains(c)) => Err((
                    "target",
                    format!(
                        "`driftDetection.ignore[].target.{key}: {v}` is a pattern; driftless matches names as written"
                    ),
                )),
                v => Ok(v.map(str::to_string)),
            }
        };
        let mut pointers = Vec::new();
        for p in rule["paths"].as_array().into_iter().flatten() {
            let p = p.as_str().unwrap_or_default();
            check_pointer(p).map_err(|why| ("paths", format!("driftDetection.ignore: {why}")))?;
            pointers.push(p.to_string());
        }
        let exact = |v: Option<String>| v.map(crate::spec::select::Pattern::Exact);
        release.ignore.push(crate::spec::helm::TargetedIgnore {
            select: crate::spec::select::ObjectSelector {
                group: part("group")?,
                version: part("version")?,
                kind: part("kind")?,
                name: exact(part("name")?),
                namespace: exact(part("namespace")?),
                labels: Default::default(),
            },
            pointers,
        });
    }
    Ok(())
}
