//! A chart release's post-renderers (Flux's HelmRelease `postRenderers`): kustomize run
//! over helm's output before anything else reads it.

use std::sync::Arc;

use super::cache::{Key, KeyBuilder};
use super::kustomize::Kustomize;
use super::runner;
use super::stage::{Shared, to_yaml};
use super::tool::ToolError;
use crate::spec::helm::HelmRelease;

/// The key of a release's run with its post-renderers: helm's own key, kustomize's
/// version and the renderers, so a change of either runs both tools again.
pub(super) fn key(helm_key: &Key, kustomize: &Kustomize, r: &HelmRelease) -> Key {
    let mut key = KeyBuilder::new("helm-post-render");
    key.part(helm_key.as_bytes())
        .part(kustomize.version.as_bytes());
    for step in &r.post_render {
        key.part(step.to_string().as_bytes());
    }
    key.finish()
}

/// helm's output through each of the release's post-renderers in turn: a kustomization of
/// that output and the renderer's `patches` and `images`, built by kustomize on a private
/// directory. Part of the release's run, kept with it (under [`key`]).
pub(super) fn post_render(
    stage: &Shared,
    kustomize: &Kustomize,
    r: &HelmRelease,
    output: Arc<Vec<u8>>,
) -> Result<Arc<Vec<u8>>, ToolError> {
    let result = run_post_renderers(stage, kustomize, &r.post_render, output)
        .map_err(|e| ToolError::from(e.to_string()));
    tracing::info!(ok = result.is_ok(), release = %r.release_name, "post-rendered");
    result
}

/// Why a release's post-renderers (`step`, from 1) did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PostRenderError {
    #[error("a directory for post-renderer {step}: {why}")]
    Dir { step: usize, why: String },
    #[error("post-renderer {step}: {why}")]
    Write { step: usize, why: String },
    #[error("post-renderer {step} (kustomize): {said}")]
    Kustomize { step: usize, said: String },
}

/// `output` through each kustomization fragment of `steps` in turn.
fn run_post_renderers(
    stage: &Shared,
    kustomize: &Kustomize,
    steps: &[serde_json::Value],
    mut output: Arc<Vec<u8>>,
) -> Result<Arc<Vec<u8>>, PostRenderError> {
    for (n, step) in steps.iter().enumerate() {
        let step_no = n + 1;
        let dir = tempfile::Builder::new()
            .prefix("driftless-post-render-")
            .tempdir()
            .map_err(|e| PostRenderError::Dir {
                step: step_no,
                why: e.to_string(),
            })?;
        let written = |e: std::io::Error| PostRenderError::Write {
            step: step_no,
            why: e.to_string(),
        };
        std::fs::write(dir.path().join("helm.yaml"), output.as_slice()).map_err(written)?;
        let mut k = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["helm.yaml"],
        });
        for field in ["patches", "images"] {
            if let Some(v) = step.get(field) {
                k[field] = v.clone();
            }
        }
        std::fs::write(dir.path().join("kustomization.yaml"), to_yaml(&[k])).map_err(written)?;
        let built = runner::run(
            &kustomize.program,
            &kustomize.args(dir.path()),
            dir.path(),
            &stage.opts.limits,
            &stage.slots,
        )
        .map_err(|e| PostRenderError::Kustomize {
            step: step_no,
            // Its private directory means nothing to whoever reads the error.
            said: e
                .to_string()
                .replace(&format!("{}/", dir.path().display()), ""),
        })?;
        output = Arc::new(built);
    }
    Ok(output)
}
