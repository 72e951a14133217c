//! An ArtifactGenerator's artifact made of this repository: each `copy` rule carried out
//! on disk in order, as source-watcher carries it out (`cp`-like: a directory is copied as
//! itself, `DIR/**` as its contents, a glob's matches below the glob's fixed part), with
//! `exclude` and the `Overwrite`, `Merge` and `Extract` strategies.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use crate::hydrate::merge::{Nulls, merge};
use crate::hydrate::not_carried_out::NotCarriedOut;
use crate::hydrate::walk::{Entry, Hidden, Links, Revisit, Walk, WalkError};

/// How a copy rule writes what it copies (`strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// A later file replaces an earlier one.
    #[default]
    Overwrite,
    /// A YAML file merges into the one there already, as Helm merges values files: maps key
    /// by key, anything else (lists too) replaced.
    Merge,
    /// Tarballs (`.tar.gz`, `.tgz`) are unpacked into the destination; a glob's other
    /// matches are passed over.
    Extract,
}

/// One of an ArtifactGenerator's `copy` rules, on this repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRule {
    /// A path of the repository (a file or a directory) or a glob over its paths: `*` and
    /// `?` within a name, `**` across directories, `[...]` a class.
    pub from: String,
    /// Where in the artifact (a directory when it ends in `/` or is empty).
    pub to: String,
    /// Globs of paths `from` selects that are left out: matched against the path in the
    /// repository and below `from`'s fixed part; one with no `/` against the name alone.
    pub exclude: Vec<String>,
    pub strategy: Strategy,
}

/// The keys of a copy rule; any other changes what Flux would copy.
const RULE_KEYS: &[&str] = &["from", "to", "exclude", "strategy"];

/// Why a copy rule is not carried out, as the ArtifactGenerator's refusal goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RuleError {
    #[error("has a copy rule whose {0}")]
    NotCarriedOut(#[from] NotCarriedOut),
    #[error("has a copy rule with strategy {0:?} (Overwrite, Merge or Extract)")]
    Strategy(String),
    #[error("has a copy rule whose `exclude` holds a non-string")]
    ExcludeNotString,
    #[error("has a copy rule whose `exclude` is not a list")]
    ExcludeNotList,
    #[error("has an exclude pattern {pattern:?}: {why}")]
    ExcludePattern {
        pattern: String,
        why: globset::ErrorKind,
    },
}

/// Why a rule could not be carried out on the repository.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CopyError {
    #[error("copying {from:?} to {to:?}: {why}")]
    Rule {
        from: String,
        to: String,
        why: Box<CopyError>,
    },
    #[error("not a glob: {0}")]
    NotAGlob(globset::ErrorKind),
    #[error("{0}")]
    Exclude(globset::ErrorKind),
    #[error("no path of the repository matches it")]
    NoMatch,
    #[error("everything it matches is excluded")]
    AllExcluded,
    #[error("Extract takes tarballs, not a directory")]
    ExtractDirectory,
    #[error("Extract takes a tarball (.tar.gz or .tgz)")]
    NotATarball,
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{0} leads out of the repository")]
    LeadsOut(String),
    #[error("{path}: not YAML: {why}")]
    NotYaml { path: String, why: String },
    #[error("{0}: a document is not a map")]
    NotAMap(String),
    /// A file system error, with the path it names when it names one.
    #[error("{}{why}", at.as_ref().map(|a| format!("{a}: ")).unwrap_or_default())]
    Io { at: Option<String>, why: String },
}

impl CopyError {
    fn io(e: impl std::fmt::Display) -> Self {
        CopyError::Io {
            at: None,
            why: e.to_string(),
        }
    }

    fn io_at(at: &str, e: impl std::fmt::Display) -> Self {
        CopyError::Io {
            at: Some(at.to_string()),
            why: e.to_string(),
        }
    }
}

/// A rule's `exclude` and `strategy`, or why it is not carried out.
pub(super) fn options(rule: &Value) -> Result<(Vec<String>, Strategy), RuleError> {
    if let Some(key) = crate::hydrate::app_yaml::unknown(rule, RULE_KEYS) {
        return Err(NotCarriedOut::field(key).into());
    }
    let strategy = match rule.get("strategy").and_then(Value::as_str) {
        None | Some("Overwrite") => Strategy::Overwrite,
        Some("Merge") => Strategy::Merge,
        Some("Extract") => Strategy::Extract,
        Some(other) => {
            return Err(RuleError::Strategy(other.to_string()));
        }
    };
    let mut exclude = Vec::new();
    match rule.get("exclude") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for p in list {
                let Some(p) = p.as_str() else {
                    return Err(RuleError::ExcludeNotString);
                };
                glob(p).map_err(|why| RuleError::ExcludePattern {
                    pattern: p.to_string(),
                    why,
                })?;
                exclude.push(p.to_string());
            }
        }
        Some(_) => return Err(RuleError::ExcludeNotList),
    }
    Ok((exclude, strategy))
}

fn glob(pattern: &str) -> Result<GlobMatcher, globset::ErrorKind> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().clone())
}

/// Whether `path` holds a glob (as source-watcher tells one).
fn is_glob(path: &str) -> bool {
    path.contains(['*', '?', '[', ']'])
}

/// Makes the artifact `rules` describe of `repo` (canonical) in `into`.
pub(super) fn materialise(repo: &Path, rules: &[CopyRule], into: &Path) -> Result<(), CopyError> {
    for rule in rules {
        Copy::new(repo, rule, into)?
            .run()
            .map_err(|why| CopyError::Rule {
                from: rule.from.clone(),
                to: rule.to.clone(),
                why: Box::new(why),
            })?;
    }
    Ok(())
}

/// One rule being carried out.
struct Copy<'a> {
    repo: &'a Path,
    rule: &'a CopyRule,
    into: &'a Path,
    exclude: Vec<(GlobMatcher, bool)>,
}

impl<'a> Copy<'a> {
    fn new(repo: &'a Path, rule: &'a CopyRule, into: &'a Path) -> Result<Copy<'a>, CopyError> {
        let mut exclude = Vec::new();
        for p in &rule.exclude {
            exclude.push((glob(p).map_err(CopyError::Exclude)?, !p.contains('/')));
        }
        Ok(Copy {
            repo,
            rule,
            into,
            exclude,
        })
    }

    fn run(&self) -> Result<(), CopyError> {
        let to = self.rule.to.as_str();
        if is_glob(&self.rule.from) {
            return self.glob();
        }
        let from = self.rule.from.as_str();
        let src = self.inside(&self.repo.join(from))?;
        if src.is_dir() {
            if self.rule.strategy == Strategy::Extract {
                return Err(CopyError::ExtractDirectory);
            }
            // A directory is copied as itself (`cp -r`), the repository's root as its contents.
            let name = Path::new(from).file_name().map(PathBuf::from);
            let dest = self.into.join(to).join(name.unwrap_or_default());
            return self.tree(&src, from, &dest, from);
        }
        if self.excluded(from, "") {
            return Ok(());
        }
        if self.rule.strategy == Strategy::Extract {
            return self.extract(&src, from);
        }
        let into_dir =
            to.is_empty() || to.ends_with('/') || self.into.join(to.trim_end_matches('/')).is_dir();
        let dest = match (into_dir, Path::new(from).file_name()) {
            (true, Some(name)) => self.into.join(to).join(name),
            _ => self.into.join(to),
        };
        self.file(&src, &dest)
    }

    /// Every path below the glob's fixed part that the glob matches: a directory whole, a
    /// file alone, each put below `to` as it lies below the fixed part.
    fn glob(&self) -> Result<(), CopyError> {
        let pattern = self.rule.from.as_str();
        let matcher = glob(pattern).map_err(CopyError::NotAGlob)?;
        let fixed: Vec<&str> = pattern
            .split('/')
            .take_while(|part| !is_glob(part))
            .collect();
        let base = fixed.join("/");
        let start = self.inside(&self.repo.join(&base))?;
        let (mut matched, mut copied) = (0usize, 0usize);
        let mut pending = vec![(start, base.clone())];
        while let Some((dir, rel)) = pending.pop() {
            for (name, e) in self.read_dir(&dir)? {
                let name = name.to_string_lossy().into_owned();
                let path = join(&rel, &name);
                let real = e?.real;
                if !matcher.is_match(&path) {
                    if real.is_dir() {
                        pending.push((real, path));
                    }
                    continue;
                }
                matched += 1;
                if self.excluded(&path, &base) {
                    continue;
                }
                copied += 1;
                let below = path
                    .strip_prefix(&base)
                    .unwrap_or(&path)
                    .trim_start_matches('/');
                let dest = self.into.join(&self.rule.to).join(below);
                match (real.is_dir(), self.rule.strategy) {
                    (true, Strategy::Extract) => pending.push((real, path)),
                    (true, _) => self.tree(&real, &path, &dest, &base)?,
                    (false, Strategy::Extract) if is_tarball(&name) => {
                        self.extract(&real, &path)?
                    }
                    (false, Strategy::Extract) => {}
                    (false, _) => self.file(&real, &dest)?,
                }
            }
        }
        match (matched, copied) {
            (0, _) => Err(CopyError::NoMatch),
            (_, 0) => Err(CopyError::AllExcluded),
            _ => Ok(()),
        }
    }

    /// Directory `src` (`rel` in the repository) copied to `dest`, less what is excluded
    /// (judged below `base` too).
    fn tree(&self, src: &Path, rel: &str, dest: &Path, base: &str) -> Result<(), CopyError> {
        std::fs::create_dir_all(dest).map_err(CopyError::io)?;
        let mut pending = vec![(src.to_path_buf(), rel.to_string(), dest.to_path_buf())];
        while let Some((dir, rel, dest)) = pending.pop() {
            for (name, e) in self.read_dir(&dir)? {
                let path = join(&rel, &name.to_string_lossy());
                if self.excluded(&path, base) {
                    continue;
                }
                let real = e?.real;
                match real.is_dir() {
                    true => pending.push((real, path, dest.join(&name))),
                    false => self.file(&real, &dest.join(&name))?,
                }
            }
        }
        Ok(())
    }

    fn file(&self, src: &Path, dest: &Path) -> Result<(), CopyError> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(CopyError::io)?;
        }
        if self.rule.strategy == Strategy::Merge && dest.is_file() {
            return merge_yaml(src, dest);
        }
        std::fs::copy(src, dest).map(drop).map_err(CopyError::io)
    }

    fn extract(&self, src: &Path, rel: &str) -> Result<(), CopyError> {
        if !is_tarball(rel) {
            return Err(CopyError::NotATarball);
        }
        let bytes = std::fs::read(src).map_err(|e| CopyError::io_at(rel, e))?;
        let dest = self.into.join(&self.rule.to);
        crate::source::oci::unpack_tarball(&bytes, &dest, Default::default())
            .map_err(|e| CopyError::io_at(rel, e))
    }

    /// Whether `path` (in the repository) is left out: matched as it is, below `base`, or
    /// by name for a pattern with no `/`.
    fn excluded(&self, path: &str, base: &str) -> bool {
        let below = match base {
            "" => None,
            b => path.strip_prefix(b).and_then(|p| p.strip_prefix('/')),
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        self.exclude.iter().any(|(g, by_name)| {
            g.is_match(path)
                || below.is_some_and(|b| g.is_match(b))
                || (*by_name && g.is_match(name))
        })
    }

    /// `p` resolved, refused when it leads out of the repository (a link).
    fn inside(&self, p: &Path) -> Result<PathBuf, CopyError> {
        let shown = p.strip_prefix(self.repo).unwrap_or(p).display().to_string();
        let real = p.canonicalize().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CopyError::Missing(shown.clone()),
            _ => CopyError::io_at(&shown, e),
        })?;
        match real.starts_with(self.repo) {
            true => Ok(real),
            false => Err(CopyError::LeadsOut(shown)),
        }
    }

    /// `dir`'s entries by name, each with what it is or why it cannot be copied. A
    /// repository's `.git` is never in its artifacts, as in Flux's; a link to a directory
    /// is not followed (as Flux's walk does not), so a link to an ancestor ends.
    fn read_dir(&self, dir: &Path) -> Result<Vec<Listed>, CopyError> {
        let walk = Walk {
            hidden: Hidden::ExceptGit,
            links: Links::FilesInside(self.repo),
            revisit: Revisit::Never,
            depth: Some(1),
        };
        let shown = |p: &Path| p.strip_prefix(self.repo).unwrap_or(p).display().to_string();
        let name = |p: &Path| p.file_name().map(OsString::from).unwrap_or_default();
        let mut out = Vec::new();
        for e in walk.iter(dir) {
            out.push(match e {
                Ok(e) => (name(&e.path), Ok(e)),
                Err(WalkError::Read { source, .. }) => return Err(CopyError::io(source)),
                Err(WalkError::LeadsOut { path }) => {
                    (name(&path), Err(CopyError::LeadsOut(shown(&path))))
                }
                Err(WalkError::Missing { path, source }) => {
                    let why = match source.kind() {
                        std::io::ErrorKind::NotFound => CopyError::Missing(shown(&path)),
                        _ => CopyError::io_at(&shown(&path), source),
                    };
                    (name(&path), Err(why))
                }
            });
        }
        Ok(out)
    }
}

/// A directory's entry by name: what it is, or why it cannot be copied.
type Listed = (OsString, Result<Entry, CopyError>);

fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_string(),
        d => format!("{d}/{name}"),
    }
}

fn is_tarball(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".tar.gz") || lower.ends_with(".tgz")
}

/// `src`'s YAML merged over `dest`'s (each file's documents merged in turn), written to
/// `dest`.
fn merge_yaml(src: &Path, dest: &Path) -> Result<(), CopyError> {
    let read = |p: &Path| -> Result<Value, CopyError> {
        let text = std::fs::read_to_string(p).map_err(CopyError::io)?;
        let docs: Vec<Value> =
            crate::spec::yaml::read_all(&text).map_err(|e| CopyError::NotYaml {
                path: shown(p),
                why: crate::spec::yaml::said(&e)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            })?;
        let mut out = Value::Object(Default::default());
        for doc in docs {
            match doc {
                Value::Object(_) => merge(&mut out, doc, Nulls::Replace),
                Value::Null => {}
                _ => return Err(CopyError::NotAMap(shown(p))),
            }
        }
        Ok(out)
    };
    let mut merged = read(dest)?;
    merge(&mut merged, read(src)?, Nulls::Replace);
    let text = serde_saphyr::to_string(&merged).map_err(CopyError::io)?;
    std::fs::write(dest, text).map_err(CopyError::io)
}

fn shown(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(from: &str, to: &str) -> CopyRule {
        CopyRule {
            from: from.into(),
            to: to.into(),
            exclude: Vec::new(),
            strategy: Strategy::Overwrite,
        }
    }

    /// A repository of `files` (each holding its own path), canonical.
    fn repo(files: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        for p in files {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, p).unwrap();
        }
        let real = dir.path().canonicalize().unwrap();
        (dir, real)
    }

    /// Every file made, relative to `dir`, sorted.
    fn made(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                match e.path().is_dir() {
                    true => pending.push(e.path()),
                    false => out.push(
                        e.path()
                            .strip_prefix(dir)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    ),
                }
            }
        }
        out.sort();
        out
    }

    fn run(repo: &Path, rules: &[CopyRule]) -> Result<Vec<String>, CopyError> {
        let into = tempfile::tempdir().unwrap();
        materialise(repo, rules, into.path())?;
        Ok(made(into.path()))
    }

    const INFRA: &[&str] = &[
        "infrastructure/controllers/descheduler/release.yaml",
        "infrastructure/controllers/sealed-secrets/release.yaml",
        "infrastructure/configs/cluster-issuer.yaml",
        "infrastructure/configs/secret.yaml",
        "infrastructure/README.md",
        "infrastructure/testdata/fixture.yaml",
        "root.yaml",
    ];

    #[test]
    fn copies_are_made_as_cp_makes_them() {
        let (_keep, repo) = repo(INFRA);
        // A directory is copied as itself; with a trailing slash too.
        let as_itself = run(&repo, &[rule("infrastructure/configs", "dest")]).unwrap();
        assert_eq!(
            as_itself,
            [
                "dest/configs/cluster-issuer.yaml",
                "dest/configs/secret.yaml"
            ]
        );
        // `DIR/**`: its contents, at every depth.
        let contents = run(&repo, &[rule("infrastructure/controllers/**", "")]).unwrap();
        assert_eq!(
            contents,
            ["descheduler/release.yaml", "sealed-secrets/release.yaml"]
        );
        // A glob's matches below its fixed part; `**` in the middle crosses directories.
        let deep = run(&repo, &[rule("infrastructure/**/release.yaml", "r/")]).unwrap();
        assert_eq!(
            deep,
            [
                "r/controllers/descheduler/release.yaml",
                "r/controllers/sealed-secrets/release.yaml"
            ]
        );
        let one_level = run(&repo, &[rule("infrastructure/configs/*.yaml", "c/")]).unwrap();
        assert_eq!(one_level, ["c/cluster-issuer.yaml", "c/secret.yaml"]);
        // A file into a directory, or to a name; the repository's root as its contents.
        let files = run(
            &repo,
            &[rule("root.yaml", "a/"), rule("root.yaml", "b/renamed.yaml")],
        )
        .unwrap();
        assert_eq!(files, ["a/root.yaml", "b/renamed.yaml"]);
        let all = run(&repo, &[rule("", "")]).unwrap();
        assert_eq!(all.len(), INFRA.len());
        // A link to a directory (here to an ancestor) is not followed.
        std::os::unix::fs::symlink(
            repo.join("infrastructure"),
            repo.join("infrastructure/configs/loop"),
        )
        .unwrap();
        let linked = run(&repo, &[rule("infrastructure/**", "")]).unwrap();
        assert_eq!(linked.len(), INFRA.len() - 1, "{linked:?}");
        // What is not there is said.
        let missing = run(&repo, &[rule("nowhere/x.yaml", "")])
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("nowhere/x.yaml does not exist"),
            "{missing}"
        );
        let none = run(&repo, &[rule("infrastructure/*.json", "")])
            .unwrap_err()
            .to_string();
        assert!(
            none.contains("no path of the repository matches it"),
            "{none}"
        );
    }

    #[test]
    fn excluded_paths_are_left_out_as_source_watcher_leaves_them() {
        let (_keep, repo) = repo(INFRA);
        let with = |from: &str, to: &str, exclude: &[&str]| CopyRule {
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            ..rule(from, to)
        };
        // By name at any depth, by a path below the fixed part, by the repository's path.
        let made = run(
            &repo,
            &[with(
                "infrastructure/**",
                "",
                &["*.md", "**/testdata/**", "controllers/descheduler/**"],
            )],
        )
        .unwrap();
        assert_eq!(
            made,
            [
                "configs/cluster-issuer.yaml",
                "configs/secret.yaml",
                "controllers/sealed-secrets/release.yaml"
            ]
        );
        let by_repo_path = run(
            &repo,
            &[with(
                "infrastructure",
                "",
                &[
                    "infrastructure/configs/secret.yaml",
                    "infrastructure/controllers/**",
                ],
            )],
        )
        .unwrap();
        assert_eq!(
            by_repo_path,
            [
                "infrastructure/README.md",
                "infrastructure/configs/cluster-issuer.yaml",
                "infrastructure/testdata/fixture.yaml"
            ]
        );
        // A single file excluded is not copied; a glob whose every match is excluded is an error.
        let skipped = run(&repo, &[with("root.yaml", "", &["root.yaml"])]).unwrap();
        assert!(skipped.is_empty());
        let all_out = run(&repo, &[with("infrastructure/*.md", "", &["*.md"])])
            .unwrap_err()
            .to_string();
        assert!(
            all_out.contains("everything it matches is excluded"),
            "{all_out}"
        );
    }

    #[test]
    fn values_merge_as_helm_merges_them_and_tarballs_are_unpacked() {
        let (_keep, repo) = repo(&[]);
        std::fs::create_dir_all(repo.join("chart")).unwrap();
        std::fs::write(
            repo.join("chart/values.yaml"),
            "replicas: 1\nimage: {repository: podinfo, tag: 6.0.0}\nports: [80, 443]\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("prod.yaml"),
            "image: {tag: 6.2.3}\nports: [8080]\n---\nreplicas: 3\n",
        )
        .unwrap();
        let merged = CopyRule {
            strategy: Strategy::Merge,
            ..rule("prod.yaml", "chart/values.yaml")
        };
        let into = tempfile::tempdir().unwrap();
        materialise(&repo, &[rule("chart", ""), merged.clone()], into.path()).unwrap();
        let text = std::fs::read_to_string(into.path().join("chart/values.yaml")).unwrap();
        let values: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            values,
            serde_json::json!({
                "replicas": 3,
                "image": {"repository": "podinfo", "tag": "6.2.3"},
                "ports": [8080]
            })
        );
        // Merge onto nothing is a copy; Overwrite replaces.
        let alone = run(&repo, &[merged]).unwrap();
        assert_eq!(alone, ["chart/values.yaml"]);

        // A chart packaged as `helm package` makes it, unpacked where `to` says.
        let mut tarball = Vec::new();
        {
            let gz = flate2::write::GzEncoder::new(&mut tarball, flate2::Compression::fast());
            let mut tar = tar::Builder::new(gz);
            for (path, body) in [
                ("podinfo/Chart.yaml", "name: podinfo\n"),
                ("podinfo/values.yaml", "a: 1\n"),
            ] {
                let mut h = tar::Header::new_gnu();
                h.set_size(body.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                tar.append_data(&mut h, path, body.as_bytes()).unwrap();
            }
            tar.into_inner().unwrap().finish().unwrap();
        }
        std::fs::create_dir_all(repo.join("dist")).unwrap();
        std::fs::write(repo.join("dist/podinfo-6.2.3.tgz"), &tarball).unwrap();
        std::fs::write(repo.join("dist/notes.txt"), "not a tarball").unwrap();
        let extract = |from: &str| CopyRule {
            strategy: Strategy::Extract,
            ..rule(from, "charts/")
        };
        assert_eq!(
            run(&repo, &[extract("dist/*")]).unwrap(),
            ["charts/podinfo/Chart.yaml", "charts/podinfo/values.yaml"]
        );
        let not_one = run(&repo, &[extract("dist/notes.txt")])
            .unwrap_err()
            .to_string();
        assert!(not_one.contains("Extract takes a tarball"), "{not_one}");
        let dir = run(&repo, &[extract("dist")]).unwrap_err().to_string();
        assert!(dir.contains("not a directory"), "{dir}");
    }

    #[test]
    fn a_rule_s_options_are_read_or_refused() {
        let v: Value = serde_json::json!({"from": "@a/x", "to": "@artifact/", "exclude": ["*.md"], "strategy": "Merge"});
        assert_eq!(
            options(&v).unwrap(),
            (vec!["*.md".to_string()], Strategy::Merge)
        );
        let unknown = serde_json::json!({"from": "@a/x", "to": "@artifact/", "mode": "x"});
        assert!(
            options(&unknown)
                .unwrap_err()
                .to_string()
                .contains("`mode`")
        );
        let bad = serde_json::json!({"from": "@a/x", "to": "@artifact/", "strategy": "Append"});
        assert!(
            options(&bad)
                .unwrap_err()
                .to_string()
                .contains("\"Append\"")
        );
        let glob = serde_json::json!({"from": "@a/x", "to": "@artifact/", "exclude": ["[a"]});
        assert!(
            options(&glob)
                .unwrap_err()
                .to_string()
                .contains("exclude pattern \"[a\"")
        );
    }
}
