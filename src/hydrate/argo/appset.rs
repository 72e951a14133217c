//! Argo CD's `ApplicationSet`: its Applications made as the ApplicationSet controller makes
//! them, from the `list` generator's elements, the `git` generator's directories and
//! files of this repository, and the `clusters` generator's clusters (the operator's
//! declared ones, `--clusters`, selected by their labels), each put into the template
//! (`{{name}}`, or `{{.name}}` with `goTemplate`). What it does not carry out (another
//! generator, a template function) is an error at its place.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::hydrate::app_yaml::{line_of, unknown};
use crate::hydrate::apps::Repository;
use crate::hydrate::argo::model::{
    ApplicationSetSpec, ClustersGenerator, GitGenerator, ListGenerator, Selector, not_carried_out,
};
use crate::hydrate::merge::{Nulls, merge};
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::hydrate::shape::{self, WrongType};
use crate::hydrate::walk::{Hidden, Links, Revisit, Walk, WalkError};
use crate::spec::clusters::Clusters;

/// ApplicationSet `spec` fields carried out or accepted.
const APPSET_CARRIED: &[&str] = &[
    "generators",
    "template",
    "goTemplate",
    "goTemplateOptions",
    "syncPolicy",
    "strategy",
];

/// One generator's parameters for one Application.
type Params = Map<String, Value>;

/// Why an ApplicationSet's Applications are not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum AppSetError {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error("the git generator reads {url}, not the repository being read")]
    OtherRepository { url: String },
    #[error("the git generator needs the tree on disk")]
    NotOnDisk,
    #[error("path {path:?}: {why}")]
    Glob { path: String, why: String },
    #[error("reading {file}: {why}")]
    Read { file: String, why: String },
    #[error("{file} is not YAML or JSON: {why}")]
    NotYaml { file: String, why: String },
    #[error(
        "the template's {{{{{tag}}}}} is not a plain field (`{{{{.a.b}}}}`); {}",
        NotCarriedOut::kind("template functions")
    )]
    TemplateFunction { tag: String },
    #[error("the template's {{{{{tag}}}}} names no parameter")]
    NoParameter { tag: String },
    #[error("the clusters generator's selector: {0}")]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    WrongType(#[from] WrongType),
    #[error("spec: {0}")]
    Spec(String),
}

/// The Applications `set` makes, each as the document an Application written in the tree
/// would be; or why it is not carried out (and the line, within `doc`, it is said at).
pub(super) fn applications(
    set: &Value,
    doc: &str,
    repo: &Repository,
    fleet: &Clusters,
) -> Result<Vec<Value>, (usize, AppSetError)> {
    let at = |key: &str| line_of(doc, key);
    let raw = &set["spec"];
    if let Some(key) = unknown(raw, APPSET_CARRIED) {
        return Err((at(key), NotCarriedOut::field(format!("spec.{key}")).into()));
    }
    shape::check(raw, &shape::APPLICATION_SET, "spec").map_err(|e| (at(&e.key), e.into()))?;
    let spec: ApplicationSetSpec =
        shape::or_default(raw).map_err(|e| (at("spec"), AppSetError::Spec(e.to_string())))?;
    let go = spec.go_template == Some(true);
    let mut out = Vec::new();
    for g in &spec.generators {
        let Some((kind, body)) = g.iter().next() else {
            continue;
        };
        let read = |why: serde_json::Error| (at(kind), AppSetError::Spec(why.to_string()));
        let (params, own): (Vec<Params>, _) = match kind.as_str() {
            "list" => {
                let list: ListGenerator = shape::or_default(body).map_err(read)?;
                (list.params().map_err(|why| (at(kind), why))?, list.template)
            }
            "git" => {
                let git: GitGenerator = shape::or_default(body).map_err(read)?;
                let params = git.params(repo, go).map_err(|why| (at(kind), why))?;
                (params, git.template)
            }
            "clusters" => {
                let c: ClustersGenerator = shape::or_default(body).map_err(read)?;
                (
                    c.params(fleet, go).map_err(|why| (at(kind), why))?,
                    c.template,
                )
            }
            other => {
                return Err((
                    at(other),
                    NotCarriedOut::named(format!("the {other} generator"))
                        .instead("list, git and clusters are")
                        .into(),
                ));
            }
        };
        let template = match own {
            // A generator's own template over the ApplicationSet's, field by field.
            Some(own) => {
                let mut template = spec.template.clone();
                merge(&mut template, Value::Object(own), Nulls::Replace);
                template
            }
            None => spec.template.clone(),
        };
        for p in params {
            let mut app = put(&template, &p, go).map_err(|why| (at("template"), why))?;
            app["apiVersion"] = json!("argoproj.io/v1alpha1");
            app["kind"] = json!("Application");
            if app["metadata"]["namespace"].is_null() {
                app["metadata"]["namespace"] = set["metadata"]["namespace"].clone();
            }
            out.push(app);
        }
    }
    Ok(out)
}

impl ListGenerator {
    /// Each element's keys.
    fn params(&self) -> Result<Vec<Params>, AppSetError> {
        if self.other.contains_key("elementsYaml") {
            return Err(NotCarriedOut::named("the list generator's `elementsYaml`").into());
        }
        Ok(self.elements.clone())
    }
}

impl GitGenerator {
    /// This repository's directories (`directories`) or files (`files`) that match.
    fn params(&self, repo: &Repository, go: bool) -> Result<Vec<Params>, AppSetError> {
        // `pathParamPrefix` and `values` change the parameters an Application is made
        // of: made without them, it would differ from Argo CD's, silently.
        if let Some(key) = not_carried_out(&self.other, &["revision", "requeueAfterSeconds"]) {
            return Err(NotCarriedOut::named(format!("the git generator's `{key}`")).into());
        }
        let url = self.repo_url.as_deref().unwrap_or_default();
        if !repo.names(url) {
            return Err(AppSetError::OtherRepository {
                url: url.to_string(),
            });
        }
        let Some(disk) = repo.repo else {
            return Err(AppSetError::NotOnDisk);
        };
        let all = walk(disk)?;
        let mut out = Vec::new();
        if !self.directories.is_empty() {
            let rules: Vec<(globset::GlobMatcher, bool)> = self
                .directories
                .iter()
                .map(|d| {
                    Ok((
                        glob(d.path.as_deref().unwrap_or_default())?,
                        d.exclude == Some(true),
                    ))
                })
                .collect::<Result<_, AppSetError>>()?;
            for (dir, is_dir) in &all {
                if !is_dir {
                    continue;
                }
                let included = rules.iter().any(|(g, ex)| !ex && g.is_match(dir));
                let excluded = rules.iter().any(|(g, ex)| *ex && g.is_match(dir));
                if included && !excluded {
                    out.push(path_params(dir, go));
                }
            }
        }
        for f in &self.files {
            let g = glob(f.path.as_deref().unwrap_or_default())?;
            for (file, is_dir) in &all {
                if *is_dir || !g.is_match(file) {
                    continue;
                }
                out.push(file_params(disk, file, go)?);
            }
        }
        Ok(out)
    }
}

/// A git generator's matching file: its values, and its directory's `path` parameters.
fn file_params(disk: &Path, file: &str, go: bool) -> Result<Params, AppSetError> {
    let text = std::fs::read_to_string(disk.join(file)).map_err(|e| AppSetError::Read {
        file: file.to_string(),
        why: e.to_string(),
    })?;
    let v: Value = serde_saphyr::from_str(&text).map_err(|e| AppSetError::NotYaml {
        file: file.to_string(),
        why: e.to_string(),
    })?;
    let dir = file.rsplit_once('/').map_or("", |(d, _)| d);
    let mut params = Params::new();
    match go {
        true => params.extend(v.as_object().cloned().unwrap_or_default()),
        false => flatten("", &v, &mut params),
    }
    params.extend(path_params(dir, go));
    Ok(params)
}

impl ClustersGenerator {
    /// The operator's declared clusters whose labels the `selector` selects (none: every
    /// one, the home cluster too, as Argo CD's selects its local cluster), each as Argo CD
    /// names a cluster Secret's parameters: `name`, `nameNormalized`, `server` (the home
    /// cluster's is `https://kubernetes.default.svc`; a cluster reached through a Secret
    /// has none here, so it is named by `name`), `metadata.labels.KEY`, and the
    /// generator's `values` (`values.KEY`, themselves templates of the others).
    fn params(&self, fleet: &Clusters, go: bool) -> Result<Vec<Params>, AppSetError> {
        if let Some(key) = not_carried_out(&self.other, &[]) {
            return Err(NotCarriedOut::named(format!("the clusters generator's `{key}`")).into());
        }
        if self.flat_list == Some(true) {
            return Err(NotCarriedOut::named("the clusters generator's `flatList`").into());
        }
        let home = fleet.home().name.clone();
        let mut out = Vec::new();
        for c in fleet.iter() {
            if !self.selector.selects(&c.labels)? {
                continue;
            }
            let server = match c.name == home {
                true => Some(crate::spec::clusters::IN_CLUSTER_SERVER.to_string()),
                false => c.server.clone(),
            };
            let mut p = Params::new();
            p.insert("name".into(), json!(c.name));
            p.insert("nameNormalized".into(), json!(normalized(&c.name)));
            if let Some(server) = server {
                p.insert("server".into(), json!(server));
            }
            match go {
                true => {
                    p.insert(
                        "metadata".into(),
                        json!({"labels": c.labels, "annotations": {}}),
                    );
                }
                false => {
                    for (k, v) in &c.labels {
                        p.insert(format!("metadata.labels.{k}"), json!(v));
                    }
                }
            }
            let mut values = Params::new();
            for (k, v) in &self.values {
                values.insert(k.clone(), put(v, &p, go)?);
            }
            match go {
                true => {
                    p.insert("values".into(), Value::Object(values));
                }
                false => {
                    for (k, v) in values {
                        p.insert(format!("values.{k}"), v);
                    }
                }
            }
            out.push(p);
        }
        Ok(out)
    }
}

/// A name as Argo CD normalizes it for a parameter: lower case, and `-` for what is
/// neither alphanumeric, `-` nor `.`.
fn normalized(name: &str) -> String {
    name.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                true => c.to_ascii_lowercase(),
                false => '-',
            },
        )
        .collect()
}

/// What a clusters generator's `selector` says that no label selector says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SelectorError {
    #[error("unknown field `{0}`")]
    UnknownField(String),
    #[error("`matchLabels.{0}` is not a string")]
    NotAString(String),
    #[error("operator {0:?} is none of In, NotIn, Exists, DoesNotExist")]
    Operator(String),
}

impl Selector {
    /// Whether this label selector (`matchLabels`, `matchExpressions` with `In`, `NotIn`,
    /// `Exists`, `DoesNotExist`) selects `labels`; none selects all.
    fn selects(&self, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
        if let Some(key) = not_carried_out(&self.other, &[]) {
            return Err(SelectorError::UnknownField(key.clone()));
        }
        for (k, v) in &self.match_labels {
            let Some(v) = v.as_str() else {
                return Err(SelectorError::NotAString(k.clone()));
            };
            if labels.get(k).map(String::as_str) != Some(v) {
                return Ok(false);
            }
        }
        for e in &self.match_expressions {
            let has = labels.get(e.key.as_deref().unwrap_or_default());
            let ok = match e.operator.as_deref().unwrap_or_default() {
                "In" => has.is_some_and(|v| e.values.contains(v)),
                "NotIn" => has.is_none_or(|v| !e.values.contains(v)),
                "Exists" => has.is_some(),
                "DoesNotExist" => has.is_none(),
                other => return Err(SelectorError::Operator(other.to_string())),
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A git generator's `path`, as a glob whose `*` stays within a directory.
fn glob(path: &str) -> Result<globset::GlobMatcher, AppSetError> {
    globset::GlobBuilder::new(path)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| AppSetError::Glob {
            path: path.to_string(),
            why: e.to_string(),
        })
}

/// Every directory and file of the repository below its root (relative, `.git` and
/// hidden entries left out), directories flagged; a directory that cannot be listed is
/// an error, as in Argo CD's git generator.
fn walk(root: &Path) -> Result<Vec<(String, bool)>, AppSetError> {
    let walk = Walk {
        hidden: Hidden::Skip,
        links: Links::Follow,
        revisit: Revisit::Never,
        depth: None,
    };
    let mut out = Vec::new();
    for e in walk.iter(root) {
        let (path, is_dir) = match e {
            Ok(e) => (e.path, e.meta.is_dir()),
            // A link to nothing is a file: reading it, if it matches, says so.
            Err(WalkError::Missing { path, .. }) => (path, false),
            Err(WalkError::Read { dir, source }) => {
                return Err(AppSetError::Read {
                    file: dir.strip_prefix(root).unwrap_or(&dir).display().to_string(),
                    why: source.to_string(),
                });
            }
            Err(WalkError::LeadsOut { .. }) => continue,
        };
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        out.push((rel, is_dir));
    }
    out.sort();
    Ok(out)
}

/// The `path` parameters of a directory, as the git generator names them.
fn path_params(dir: &str, go: bool) -> Params {
    let base = dir.rsplit('/').next().unwrap_or(dir);
    let normalized = normalized(base);
    let segments: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    let mut p = Params::new();
    if go {
        p.insert(
            "path".into(),
            json!({"path": dir, "basename": base, "basenameNormalized": normalized, "segments": segments}),
        );
    } else {
        p.insert("path".into(), json!(dir));
        p.insert("path.path".into(), json!(dir));
        p.insert("path.basename".into(), json!(base));
        p.insert("path.basenameNormalized".into(), json!(normalized));
        for (i, s) in segments.iter().enumerate() {
            p.insert(format!("path[{i}]"), json!(s));
        }
    }
    p
}

/// A file's values as fasttemplate names them: `a.b.c`.
fn flatten(prefix: &str, v: &Value, out: &mut Params) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = match prefix {
                    "" => k.clone(),
                    p => format!("{p}.{k}"),
                };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// The template with `params` put in every string.
fn put(template: &Value, params: &Params, go: bool) -> Result<Value, AppSetError> {
    Ok(match template {
        Value::String(s) => Value::String(fill(s, params, go)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| put(v, params, go))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Ok((fill(k, params, go)?, put(v, params, go)?)))
                .collect::<Result<_, AppSetError>>()?,
        ),
        other => other.clone(),
    })
}

/// `{{name}}` (or `{{.name}}`, `{{ .path.basename }}` with goTemplate) replaced by its
/// parameter's value.
fn fill(s: &str, params: &Params, go: bool) -> Result<String, AppSetError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let Some(end) = rest[i..].find("}}") else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let tag = rest[i + 2..i + end].trim();
        rest = &rest[i + end + 2..];
        let value = match go {
            true => {
                let path = tag.strip_prefix('.').filter(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
                });
                let Some(path) = path else {
                    return Err(AppSetError::TemplateFunction {
                        tag: tag.to_string(),
                    });
                };
                let mut at = params.get(path.split('.').next().unwrap_or_default());
                for k in path.split('.').skip(1) {
                    at = at.and_then(|v| v.get(k));
                }
                at.cloned()
            }
            false => params.get(tag).cloned(),
        };
        match value {
            Some(Value::String(v)) => out.push_str(&v),
            Some(Value::Null) | None if !go => {
                // fasttemplate leaves an unknown tag as it is.
                out.push_str(&format!("{{{{{tag}}}}}"));
            }
            Some(Value::Null) | None => {
                return Err(AppSetError::NoParameter {
                    tag: tag.to_string(),
                });
            }
            Some(other) => out.push_str(&other.to_string()),
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository(dir: &Path) -> Repository<'_> {
        Repository {
            repo: Some(dir),
            root: Some(""),
            urls: [crate::hydrate::app_yaml::normalise_url(
                "https://github.com/acme/gitops",
            )]
            .into_iter()
            .collect(),
            revisions: &[],
        }
    }

    #[test]
    fn list_and_git_generators_make_their_applications() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["apps/web", "apps/shop", "apps/old", "config/prod"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("config/prod/config.json"),
            r#"{"cluster": {"name": "prod", "tier": 1}}"#,
        )
        .unwrap();
        let set: Value = serde_saphyr::from_str(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: s\n  namespace: argocd\nspec:\n  generators:\n    - list:\n        elements:\n          - name: one\n            ns: team-a\n    - git:\n        repoURL: https://github.com/acme/gitops.git\n        directories:\n          - path: apps/*\n          - path: apps/old\n            exclude: true\n    - git:\n        repoURL: https://github.com/acme/gitops.git\n        files:\n          - path: config/*/config.json\n  template:\n    metadata:\n      name: '{{path.basename}}{{name}}{{cluster.name}}'\n    spec:\n      source:\n        path: '{{path}}'\n      destination:\n        namespace: '{{ns}}'\n",
        )
        .unwrap();
        let apps = applications(&set, "", &repository(dir.path()), &Clusters::default()).unwrap();
        let names: Vec<&str> = apps
            .iter()
            .map(|a| a["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "{{path.basename}}one{{cluster.name}}",
                "shop{{name}}{{cluster.name}}",
                "web{{name}}{{cluster.name}}",
                "prod{{name}}prod"
            ]
        );
        assert_eq!(apps[1]["spec"]["source"]["path"], "apps/shop");
        assert_eq!(apps[1]["kind"], "Application");
        assert_eq!(apps[1]["metadata"]["namespace"], "argocd");
        assert_eq!(apps[0]["spec"]["destination"]["namespace"], "team-a");
    }

    /// A generator's field of the wrong type is refused at its line, where it was read
    /// as absent (a list generator's `elements: web` made no Application, silently).
    #[test]
    fn a_generator_field_of_the_wrong_type_is_refused_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |generator: &str| {
            let doc = format!(
                "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: s\nspec:\n  generators:\n{generator}  template:\n    metadata:\n      name: x\n"
            );
            let set: Value = serde_saphyr::from_str(&doc).unwrap();
            let (line, why) =
                applications(&set, &doc, &repository(dir.path()), &Clusters::default())
                    .unwrap_err();
            (line, why.to_string())
        };
        assert_eq!(
            refused("    - list:\n        elements: web\n"),
            (
                7,
                "`spec.generators[0].list.elements` is a string, not a list".into()
            )
        );
        assert_eq!(
            refused("    - clusters:\n        selector:\n          matchExpressions:\n            - key: env\n              operator: In\n              values: prod\n"),
            (11, "`spec.generators[0].clusters.selector.matchExpressions[0].values` is a string, not a list".into())
        );
        assert_eq!(
            refused(
                "    - git:\n        repoURL: https://github.com/acme/gitops\n        directories:\n          - path: 3\n"
            ),
            (
                9,
                "`spec.generators[0].git.directories[0].path` is a number, not a string".into()
            )
        );
        assert_eq!(
            refused("    - git:\n        repoURL: https://github.com/acme/gitops\n        revision: HEAD\n        pathParamPrefix: app\n        directories:\n          - path: '*'\n").1,
            NotCarriedOut::named("the git generator's `pathParamPrefix`").to_string()
        );
        assert_eq!(
            refused("    - list:\n        elements: []\n        elementsYaml: '[]'\n").1,
            NotCarriedOut::named("the list generator's `elementsYaml`").to_string()
        );
    }

    /// The clusters generator: one Application per declared cluster its selector
    /// selects, named by Argo CD's parameters; the home cluster's server is the
    /// in-cluster URL; `values` are templates of the rest.
    #[test]
    fn the_clusters_generator_makes_an_application_per_selected_cluster() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("eu.yaml"),
            "apiVersion: v1\nkind: Config\ncurrent-context: e\ncontexts:\n- name: e\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://10.0.0.9:6443'}\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("clusters.toml"),
            "[cluster.prod-eu]\nkubeconfig = \"eu.yaml\"\nlabels = { env = \"prod\", region = \"eu\" }\n[cluster.prod_us]\nsecret = \"hub/us\"\nlabels = { env = \"prod\", region = \"us\" }\n[cluster.dev]\nkubeconfig = \"dev.yaml\"\nlabels = { env = \"dev\" }\n[cluster.mgmt]\n",
        )
        .unwrap();
        let fleet = Clusters::read_file(&dir.path().join("clusters.toml")).unwrap();
        let set = |generator: &str, go: bool| -> Value {
            serde_saphyr::from_str(&format!(
                "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: s\n  namespace: argocd\nspec:\n  goTemplate: {go}\n  generators:\n{generator}  template:\n    metadata:\n      name: '{}'\n    spec:\n      destination:\n        name: '{}'\n        server: '{}'\n",
                if go { "web-{{.nameNormalized}}-{{.values.tier}}" } else { "web-{{nameNormalized}}-{{values.tier}}" },
                if go { "{{.name}}" } else { "{{name}}" },
                if go { "{{.metadata.labels.region}}" } else { "{{metadata.labels.region}}" },
            ))
            .unwrap()
        };
        let made = |generator: &str, go: bool| {
            applications(&set(generator, go), "", &repository(dir.path()), &fleet).map(|apps| {
                apps.iter()
                    .map(|a| {
                        format!(
                            "{} {} {}",
                            a["metadata"]["name"].as_str().unwrap(),
                            a["spec"]["destination"]["name"].as_str().unwrap(),
                            a["spec"]["destination"]["server"].as_str().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
            })
        };
        let prod = "    - clusters:\n        selector:\n          matchLabels:\n            env: prod\n        values:\n          tier: 'gold-{{name}}'\n";
        assert_eq!(
            made(prod, false).unwrap(),
            [
                "web-prod-eu-gold-prod-eu prod-eu eu",
                "web-prod-us-gold-prod_us prod_us us"
            ]
        );
        let prod_go = prod.replace("{{name}}", "{{.name}}");
        assert_eq!(
            made(&prod_go, true).unwrap(),
            [
                "web-prod-eu-gold-prod-eu prod-eu eu",
                "web-prod-us-gold-prod_us prod_us us"
            ]
        );
        // No selector: every cluster, the home cluster too; an expression.
        let all = "    - clusters: {}\n";
        assert_eq!(made(all, false).unwrap().len(), 4);
        let not_prod = "    - clusters:\n        selector:\n          matchExpressions:\n            - {key: env, operator: NotIn, values: [prod]}\n";
        let server_of = |generator: &str| {
            applications(&set(generator, false), "", &repository(dir.path()), &fleet)
                .unwrap()
                .iter()
                .map(|a| a["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            server_of(not_prod),
            ["web-dev-{{values.tier}}", "web-mgmt-{{values.tier}}"]
        );
        // The home cluster is named by the in-cluster URL.
        let home: Value = serde_saphyr::from_str(
            "spec:\n  generators:\n    - clusters:\n        selector:\n          matchExpressions:\n            - {key: env, operator: DoesNotExist}\n  template:\n    metadata:\n      name: '{{name}}'\n    spec:\n      destination:\n        server: '{{server}}'\n",
        )
        .unwrap();
        let apps = applications(&home, "", &repository(dir.path()), &fleet).unwrap();
        assert_eq!(apps.len(), 1);
        assert_eq!(
            apps[0]["spec"]["destination"]["server"],
            "https://kubernetes.default.svc"
        );
        let bad = "    - clusters:\n        selector:\n          matchExpressions:\n            - {key: env, operator: Gt, values: ['1']}\n";
        assert_eq!(
            made(bad, false).unwrap_err().1.to_string(),
            "the clusters generator's selector: operator \"Gt\" is none of In, NotIn, Exists, DoesNotExist"
        );
    }

    #[test]
    fn go_templates_read_fields_and_refuse_functions() {
        let mut p = Params::new();
        p.insert("path".into(), json!({"basename": "web"}));
        assert_eq!(
            fill("app-{{ .path.basename }}", &p, true).unwrap(),
            "app-web"
        );
        assert_eq!(
            fill("{{ .missing }}", &p, true).unwrap_err().to_string(),
            "the template's {{.missing}} names no parameter"
        );
        assert_eq!(
            fill("{{ .path.basename | upper }}", &p, true)
                .unwrap_err()
                .to_string(),
            "the template's {{.path.basename | upper}} is not a plain field (`{{.a.b}}`); template functions are not carried out by driftless yet"
        );
    }
}
