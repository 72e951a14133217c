//! What Argo CD tells a config management plugin: its build environment, the
//! Application's `plugin.env` and its parameters, as environment variables.

use std::collections::BTreeMap;

use crate::hydrate::argo::{PluginParameter, PluginPart};
use crate::hydrate::tool::Context;

/// What Argo CD tells a plugin: the build environment, the Application's `plugin.env`
/// (as `ARGOCD_ENV_*`, with the build environment's `$VARIABLES` put in), and its
/// parameters (as JSON and as `PARAM_*`).
pub(super) fn environment(part: &PluginPart, cx: &Context) -> Vec<(String, String)> {
    let revisions = cx
        .input
        .checkout
        .as_ref()
        .map(|c| c.revisions.as_slice())
        .unwrap_or_default();
    // The resolved commit where the source knows it, else the name it follows.
    let revision = revisions
        .iter()
        .find(|r| r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit()))
        .or(revisions.first())
        .cloned()
        .unwrap_or_default();
    let short = |n: usize| revision.chars().take(n).collect::<String>();
    let kube_version = cx
        .input
        .cluster
        .kube_version
        .as_deref()
        .map(|v| {
            let v = v.trim_start_matches('v');
            v.split(['+', '-']).next().unwrap_or(v).to_string()
        })
        .unwrap_or_default();
    let mut env: Vec<(String, String)> = vec![
        ("ARGOCD_APP_NAME".into(), part.app.clone()),
        ("ARGOCD_APP_NAMESPACE".into(), part.namespace.clone()),
        ("ARGOCD_APP_PROJECT_NAME".into(), part.project.clone()),
        ("ARGOCD_APP_REVISION".into(), revision.clone()),
        ("ARGOCD_APP_REVISION_SHORT".into(), short(7)),
        ("ARGOCD_APP_REVISION_SHORT_8".into(), short(8)),
        ("ARGOCD_APP_SOURCE_PATH".into(), part.path.clone()),
        ("ARGOCD_APP_SOURCE_REPO_URL".into(), part.repo_url.clone()),
        (
            "ARGOCD_APP_SOURCE_TARGET_REVISION".into(),
            part.target_revision.clone(),
        ),
        ("KUBE_VERSION".into(), kube_version),
        (
            "KUBE_API_VERSIONS".into(),
            cx.input.cluster.api_versions.join(","),
        ),
    ];
    let build: BTreeMap<String, String> = env.iter().cloned().collect();
    for e in &part.wanted.env {
        env.push((
            format!("ARGOCD_ENV_{}", e.name),
            interpolate(&e.value, &build),
        ));
    }
    if !part.wanted.parameters.is_empty() {
        env.push((
            "ARGOCD_APP_PARAMETERS".into(),
            serde_json::to_string(&part.wanted.parameters).unwrap_or_default(),
        ));
        env.extend(parameter_variables(&part.wanted.parameters));
    }
    env
}

/// `PARAM_<NAME>`, `PARAM_<NAME>_<INDEX>` and `PARAM_<NAME>_<KEY>`, upper case, each
/// character that is not a letter or digit an underscore.
fn parameter_variables(parameters: &[PluginParameter]) -> Vec<(String, String)> {
    let upper = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for p in parameters {
        let base = format!("PARAM_{}", upper(&p.name));
        if let Some(s) = &p.string {
            out.push((base.clone(), s.clone()));
        }
        for (i, item) in p.array.iter().flatten().enumerate() {
            out.push((format!("{base}_{i}"), item.clone()));
        }
        for (k, v) in p.map.iter().flatten() {
            out.push((format!("{base}_{}", upper(k)), v.clone()));
        }
    }
    out
}

/// `$NAME` and `${NAME}` of `vars` put in (`$$` is a `$`); other names are left empty,
/// as Argo CD leaves them.
fn interpolate(value: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix('{')
            && let Some(end) = r.find('}')
        {
            out.push_str(vars.get(&r[..end]).map_or("", String::as_str));
            rest = &r[end + 1..];
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if end == 0 {
                out.push('$');
            } else {
                out.push_str(vars.get(&after[..end]).map_or("", String::as_str));
            }
            rest = &after[end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_variables_as_argo_cd_names_them() {
        let params: Vec<PluginParameter> = serde_json::from_str(
            r#"[{"name":"some-string-param","string":"v"},
                {"name":"values-files","array":["a.yaml","b.yaml"]},
                {"name":"helm-parameters","map":{"image.tag":"v1.2.3"}}]"#,
        )
        .unwrap();
        assert_eq!(
            parameter_variables(&params),
            [
                ("PARAM_SOME_STRING_PARAM", "v"),
                ("PARAM_VALUES_FILES_0", "a.yaml"),
                ("PARAM_VALUES_FILES_1", "b.yaml"),
                ("PARAM_HELM_PARAMETERS_IMAGE_TAG", "v1.2.3"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn env_values_take_the_build_environment() {
        let vars: BTreeMap<String, String> = [("ARGOCD_APP_REVISION", "abc123")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(
            interpolate("test-$ARGOCD_APP_REVISION", &vars),
            "test-abc123"
        );
        assert_eq!(interpolate("${ARGOCD_APP_REVISION}x", &vars), "abc123x");
        assert_eq!(interpolate("$$HOME and $UNSET.", &vars), "$HOME and .");
        assert_eq!(interpolate("costs 5$", &vars), "costs 5$");
    }
}
