//! OCI artifacts at the command line: the registry flags every command that reads a tree
//! takes, `oci://` references in place of a path, and `driftless push`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use driftless::source::oci::{self, OciConfig, OciSource, RegistryOptions, Selector};

/// How registries are reached and artifacts read.
#[derive(Args, Debug, Clone, Default)]
pub struct RegistryArgs {
    /// A Docker config.json whose `auths` holds the registry's credentials [default:
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers
    /// (credsStore, credHelpers) are not run.
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// File holding the registry user name (with --password-file; wins over config.json).
    #[arg(long, value_name = "FILE", requires = "password_file")]
    pub username_file: Option<PathBuf>,
    /// File holding the registry password or token.
    #[arg(long, value_name = "FILE", requires = "username_file")]
    pub password_file: Option<PathBuf>,
    /// PEM certificates to trust for the registry, besides the system's roots.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only.
    #[arg(long)]
    pub plain_http: bool,
    /// The media type of the artifact's layer that holds the tree (a tar+gzip) [default:
    /// application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it].
    #[arg(long, value_name = "TYPE")]
    pub layer_media_type: Option<String>,
    /// Pull an artifact only when a cosign signature of its digest by this key (cosign.pub:
    /// ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes).
    /// Keyless signatures are not checked.
    #[arg(long, value_name = "FILE")]
    pub verify_key: Option<PathBuf>,
}

impl RegistryArgs {
    pub fn options(&self) -> anyhow::Result<RegistryOptions> {
        let basic = match (&self.username_file, &self.password_file) {
            (Some(u), Some(p)) => {
                let read = |path: &Path, what: &str| -> anyhow::Result<String> {
                    let text = std::fs::read_to_string(path).with_context(|| {
                        format!("reading the registry {what} {}", path.display())
                    })?;
                    let text = text.trim_end_matches(['\n', '\r']).to_string();
                    anyhow::ensure!(
                        !text.is_empty(),
                        "the registry {what} file {} is empty",
                        path.display()
                    );
                    Ok(text)
                };
                Some((read(u, "user name")?, read(p, "password")?))
            }
            _ => None,
        };
        Ok(RegistryOptions {
            plain_http: self.plain_http,
            ca_file: self.ca_file.clone(),
            config_file: self.registry_config.clone(),
            basic,
        })
    }

    /// The source config for `reference` followed by `selector` (the reference's own tag
    /// or digest, else `latest`, when `None`).
    pub fn config(
        &self,
        reference: &str,
        selector: Option<Selector>,
        cache_dir: PathBuf,
    ) -> anyhow::Result<OciConfig> {
        let (repository, named) = oci::reference::parse(reference)?;
        Ok(OciConfig {
            repository,
            selector: selector
                .or(named)
                .unwrap_or_else(|| Selector::Tag("latest".into())),
            layer_media_type: self.layer_media_type.clone(),
            registry: self.options()?,
            cache_dir,
            limits: oci::Limits::default(),
            path: String::new(),
            verify_key: match &self.verify_key {
                None => None,
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading --verify-key {}", path.display()))?;
                    Some(
                        oci::verify::VerifyKey::from_pem(&text)
                            .map_err(|e| anyhow::anyhow!("--verify-key {}: {e}", path.display()))?,
                    )
                }
            },
        })
    }
}

/// An `oci://` PATH pulled into a temporary directory, which `path` then names; the
/// directory lives as long as what is returned.
/// Whether a command's PATH names an artifact (`oci://…`), not a directory.
pub fn is_oci(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.starts_with("oci://"))
}

pub async fn pull_path(
    path: &mut PathBuf,
    registry: &RegistryArgs,
) -> anyhow::Result<Option<tempfile::TempDir>> {
    let Some(reference) = path.to_str().filter(|p| p.starts_with("oci://")) else {
        return Ok(None);
    };
    let tmp = tempfile::Builder::new()
        .prefix("driftless-oci-")
        .tempdir()
        .context("creating a directory for the artifact")?;
    let cfg = registry.config(reference, None, tmp.path().to_path_buf())?;
    let source = OciSource::open(cfg)?;
    let rev = match source.fetch().await? {
        oci::Fetched::New(rev) | oci::Fetched::Unchanged(rev) => rev,
    };
    tracing::info!(source = %source.display(), revision = %rev.id, "pulled");
    *path = rev.dir;
    Ok(Some(tmp))
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The spec tree to publish.
    pub dir: PathBuf,
    /// Where: oci://HOST/REPO:TAG.
    pub reference: String,
    /// Publish the rendered tree (what `render --out` writes: Kustomize, Helm and Jsonnet
    /// replaced by plain YAML) instead of the tree as it is.
    #[arg(long)]
    pub render: bool,
    /// The `org.opencontainers.image.source` annotation [default: the git remote
    /// `origin` of the repository holding DIR, without credentials].
    #[arg(long, value_name = "URL")]
    pub source: Option<String>,
    /// The `org.opencontainers.image.revision` annotation [default: BRANCH@sha1:COMMIT of
    /// the repository holding DIR, as Flux writes it].
    #[arg(long, value_name = "REVISION")]
    pub revision: Option<String>,
    /// The `org.opencontainers.image.created` annotation, RFC 3339 [default: from
    /// SOURCE_DATE_EPOCH, else the HEAD commit's time, else 1970-01-01T00:00:00Z]: never
    /// the clock, so the same tree pushed twice has the same digest.
    #[arg(long, value_name = "TIME")]
    pub created: Option<String>,
    #[command(flatten)]
    pub policy: super::PolicyArgs,
}

/// `driftless push DIR oci://HOST/REPO:TAG`.
pub async fn push(args: &PushArgs) -> anyhow::Result<u8> {
    let (repository, selector) = oci::reference::parse(&args.reference)?;
    let tag = match selector {
        Some(Selector::Tag(t)) => t,
        _ => anyhow::bail!("push takes oci://HOST/REPO:TAG (a tag, not a digest)"),
    };
    let git = git2::Repository::discover(&args.dir).ok();
    let head = git.as_ref().and_then(|r| {
        let head = r.head().ok()?;
        let commit = head.peel_to_commit().ok()?;
        Some((
            head.shorthand().map(str::to_string),
            commit.id().to_string(),
            commit.time().seconds(),
        ))
    });
    let created = match &args.created {
        Some(c) => {
            let t: k8s_openapi::jiff::Timestamp = c
                .parse()
                .with_context(|| format!("--created {c:?} is not an RFC 3339 time"))?;
            t.to_string()
        }
        None => {
            let secs = match std::env::var("SOURCE_DATE_EPOCH") {
                Ok(v) => v.trim().parse::<i64>().with_context(|| {
                    format!("SOURCE_DATE_EPOCH {v:?} is not a number of seconds")
                })?,
                Err(_) => head.as_ref().map(|h| h.2).unwrap_or(0),
            };
            k8s_openapi::jiff::Timestamp::from_second(secs)
                .context("SOURCE_DATE_EPOCH is out of range")?
                .to_string()
        }
    };
    let source = match &args.source {
        Some(s) => s.clone(),
        None => git
            .as_ref()
            .and_then(|r| {
                let remote = r.find_remote("origin").ok()?;
                remote
                    .url()
                    .ok()
                    .map(driftless::source::git::strip_userinfo)
            })
            .unwrap_or_default(),
    };
    let revision = match (&args.revision, &head) {
        (Some(r), _) => r.clone(),
        (None, Some((branch, id, _))) => {
            format!("{}@sha1:{id}", branch.as_deref().unwrap_or("HEAD"))
        }
        (None, None) => String::new(),
    };
    let rendered;
    let dir = match args.render {
        false => args.dir.clone(),
        true => {
            // Pushed rendered, the tree is applied as it is: a held app left out would
            // be pruned, so any error stops it (as `render --out`).
            let policy = driftless::spec::Policy {
                all_or_nothing: true,
                ..args.policy.policy()?
            };
            let Some(loaded) =
                super::tree::load_rendered(&args.dir, &policy, &args.policy.tools, false)?
            else {
                return Ok(super::exit::ERROR);
            };
            rendered = tempfile::Builder::new()
                .prefix("driftless-push-")
                .tempdir()
                .context("creating a directory for the rendered tree")?;
            super::tree::write_out(&loaded, rendered.path())?;
            rendered.path().to_path_buf()
        }
    };
    let push = oci::Push {
        dir,
        repository,
        tag: tag.clone(),
        source,
        revision,
        created,
    };
    let digest = oci::push(&push, &args.policy.registry.options()?).await?;
    writeln!(
        std::io::stdout().lock(),
        "pushed {}:{tag}@{digest}",
        push.repository
    )?;
    Ok(super::exit::OK)
}
