//! `[helm.NAME]`: a chart release (`spec::helm`). Read here, with the same fields, checks
//! and did-you-mean as the other kinds; rendered by the rendering stage.

use std::collections::BTreeMap;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::fields::{Fields, namespace_field};
use super::messages::short;
use super::{FileCtx, PolicyKeys, Value};
use crate::spec::helm::HelmRelease;
use crate::spec::model::defaults;
use crate::spec::{SpecError, names, order, policy};

/// Every `[helm.NAME]` of one TOML file, and the errors of those tables (the file's other
/// errors are the spec loader's to report).
pub(in crate::spec) fn releases(file: &str, text: &str) -> (Vec<HelmRelease>, Vec<SpecError>) {
    let mut ctx = FileCtx::new(file, text);
    let Ok(root) = DeTable::parse(text) else {
        return (Vec::new(), Vec::new());
    };
    let root = root.into_inner();
    let file_ns = root
        .get("namespace")
        .and_then(|v| v.get_ref().as_str())
        .map(str::to_string);
    let mut out = Vec::new();
    let specs = root.get("helm").and_then(|v| {
        ctx.value_as(
            v,
            DeValue::as_table,
            "`helm`",
            "a table of helm specs ([helm.NAME])",
        )
    });
    for (name, body) in specs.into_iter().flat_map(|t| t.iter()) {
        if let Some(r) = release(&mut ctx, name, body, file_ns.as_deref()) {
            out.push(r);
        }
    }
    (out, ctx.errors)
}

fn release(
    ctx: &mut FileCtx,
    name: &toml::Spanned<std::borrow::Cow<str>>,
    body: &Value,
    file_ns: Option<&str>,
) -> Option<HelmRelease> {
    let what = format!("helm `{}`", short(name.get_ref()));
    let table = ctx.value_as(body, DeValue::as_table, &what, "a table")?;
    let before = ctx.count();
    ctx.check(
        &name.span(),
        "helm name",
        name.get_ref(),
        names::dns1123_label,
    );
    let mut f = Fields::new(table, what, name.span());
    let namespace = namespace_field(ctx, &mut f, file_ns, defaults::NAMESPACE);
    let chart = f.req_string(ctx, "chart");
    let repository = f.string(ctx, "repository");
    if let Some(repo) = &repository {
        let url = repo.get_ref();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            ctx.err(
                &repo.span(),
                format!("invalid `repository` {url:?}: an http(s):// chart repository URL (an OCI registry is named in `chart` as oci://…)"),
            );
        }
    }
    let version = f.string(ctx, "version");
    if let (Some(repo), None) = (&repository, &version) {
        ctx.err(
            &repo.span(),
            "a chart from a repository needs `version` (an exact version, as \"6.2.3\", or a range, as \"^6.2\")",
        );
    }
    let release_name = f
        .string(ctx, "release-name")
        .map(|s| {
            ctx.check(&s.span(), "release-name", s.get_ref(), names::dns1123_label);
            s.into_inner()
        })
        .unwrap_or_else(|| name.get_ref().to_string());
    let values_files = f
        .strings(ctx, "values-files", in_tree)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let values = match f.get("values") {
        Some(v) => match v.get_ref() {
            DeValue::Table(_) => super::manifest::to_json(ctx, v).unwrap_or_default(),
            _ => {
                ctx.wrong_type(v, "`values`", "a table");
                serde_json::Value::Null
            }
        },
        None => serde_json::Value::Null,
    };
    let plain_http = f.boolean(ctx, "plain-http").unwrap_or(false);
    let mut credential = |key: &'static str| {
        f.string(ctx, key)
            .and_then(|s| match in_credentials(s.get_ref()) {
                Ok(()) => Some(s.into_inner()),
                Err(why) => {
                    ctx.err(&s.span(), format!("invalid `{key}`: {why}"));
                    None
                }
            })
    };
    let username_file = credential("username-file");
    let password_file = credential("password-file");
    let ca_file = credential("ca-file");
    let insecure_skip_tls_verify = f.boolean(ctx, "insecure-skip-tls-verify").unwrap_or(false);
    let include_crds = f.boolean(ctx, "include-crds").unwrap_or(true);
    let skip_tests = f.boolean(ctx, "skip-tests").unwrap_or(true);
    let kube_version = f.string(ctx, "kube-version").map(|s| s.into_inner());
    let api_versions = f
        .strings(ctx, "api-versions", |_| Ok(()))
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let keys = super::policy_keys(ctx, &mut f);
    f.finish(ctx);
    let chart = chart?;
    check_chart(ctx, &chart, repository.is_some(), version.is_some());
    let annotations = policy_annotations(&keys);
    (ctx.count() == before).then(|| HelmRelease {
        name: name.get_ref().to_string(),
        namespace,
        at: ctx.loc(name.span().start),
        chart: chart.get_ref().trim_end_matches('/').to_string(),
        repository: repository.map(|r| r.into_inner().trim_end_matches('/').to_string()),
        version: version.map(|v| v.into_inner()),
        plain_http,
        username_file,
        password_file,
        ca_file,
        insecure_skip_tls_verify,
        release_name,
        values_files,
        values,
        include_crds,
        skip_tests,
        kube_version,
        api_versions,
        annotations,
        ignore: Vec::new(),
        post_render: Vec::new(),
    })
}

/// Checks where `chart` says the chart comes from, with or without a `repository` and a
/// `version`: an oci:// reference, a chart's name in a repository, or a directory in the
/// tree.
fn check_chart(ctx: &mut FileCtx, chart: &Spanned<String>, repository: bool, version: bool) {
    let oci = chart.get_ref().starts_with("oci://");
    if oci {
        if repository {
            ctx.err(
                &chart.span(),
                "an oci:// chart names its registry itself: leave `repository` out",
            );
        }
        if !version {
            ctx.err(
                &chart.span(),
                "a chart from an OCI registry needs `version` (an exact version, as \"6.2.3\", or a range, as \"^6.2\")",
            );
        }
    } else if chart.get_ref().contains("://") {
        ctx.err(
            &chart.span(),
            "invalid `chart`: a directory in the tree, a chart's name with `repository`, or oci://…",
        );
    } else if repository {
        if !chart
            .get_ref()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || chart.get_ref().starts_with('.')
        {
            ctx.err(
                &chart.span(),
                format!(
                    "invalid `chart` {:?}: with `repository`, the chart's name there",
                    chart.get_ref()
                ),
            );
        }
    } else if let Err(why) = in_tree(chart.get_ref()) {
        ctx.err(&chart.span(), format!("invalid `chart`: {why}"));
    }
}

/// The release's policies, which travel as driftless's own annotations on each of its
/// objects: the manifests' rules then hold for them unchanged.
fn policy_annotations(keys: &PolicyKeys) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    if !keys.ignore_fields.is_empty() {
        annotations.insert(
            policy::IGNORE_FIELDS.to_string(),
            keys.ignore_fields.join(", "),
        );
    }
    if !keys.prune {
        annotations.insert(policy::PRUNE.to_string(), "disabled".to_string());
    }
    if !keys.depends_on.is_empty() {
        let ids: Vec<String> = keys.depends_on.iter().map(|(id, _)| id.clone()).collect();
        annotations.insert(policy::DEPENDS_ON.to_string(), ids.join(","));
    }
    if keys.wave != 0 {
        annotations.insert(order::WAVE.to_string(), keys.wave.to_string());
    }
    if let Some(r) = keys.replace {
        use crate::spec::model::ReplaceKey;
        let value = match r {
            ReplaceKey::OnImmutable => "on-immutable",
            ReplaceKey::Never => "never",
        };
        annotations.insert(policy::REPLACE.to_string(), value.to_string());
    }
    annotations
}

/// A file in the operator's credentials directory: its name there, nothing that climbs out.
fn in_credentials(p: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == ".." || c.is_empty()) {
        Err(format!(
            "{p:?}: a file's name in the credentials directory (--credentials-dir), without `..`"
        ))
    } else {
        Ok(())
    }
}

/// A path relative to the spec root, without `..`.
fn in_tree(p: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == "..") {
        Err(format!(
            "{p:?} is not a path in the spec tree: relative to its root, without `..`"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_read_with_its_defaults_and_policies() {
        let (r, errors) = releases(
            "apps.toml",
            "namespace = \"web\"\n[helm.podinfo]\nchart = \"charts/podinfo\"\nvalues = { replicaCount = 2, ui = { color = \"#fff\" } }\nwave = 2\nprune = false\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        let r = &r[0];
        assert_eq!(
            (r.namespace.as_str(), r.release_name.as_str()),
            ("web", "podinfo")
        );
        assert_eq!(r.values["ui"]["color"], "#fff");
        assert!(r.include_crds && r.skip_tests);
        assert_eq!(r.annotations[order::WAVE], "2");
        assert_eq!(r.annotations[policy::PRUNE], "disabled");
        assert_eq!(r.at.line, 2);
    }

    #[test]
    fn mistakes_are_at_their_place() {
        let (r, errors) = releases(
            "apps.toml",
            "[helm.a]\nchart = \"../out\"\nvalue = {}\n[helm.b]\nchart = \"c\"\nrepository = \"https://x\"\n",
        );
        assert!(r.is_empty());
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(
            shown
                .iter()
                .any(|e| e.starts_with("apps.toml:3:1: unknown field `value`")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|e| e.starts_with("apps.toml:2:9: invalid `chart`")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|e| e.starts_with("apps.toml:6:14: a chart from a repository needs `version`")),
            "{shown:?}"
        );
    }
}
