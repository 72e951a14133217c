//! What each receiver is sent for a notice: the URL, headers and body of one POST. Pure,
//! so every request shape is tested without a network.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::json;
use sha2::Sha256;

use super::{Context, Event, Notice};
use crate::report::status::SourceError;

/// The header a signed webhook carries: `sha256=<hex HMAC-SHA256 of the body>`.
pub(crate) const SIGNATURE_HEADER: &str = "X-Driftless-Signature";

/// GitHub and GitLab cut a status description at 140 and 255 characters.
const DESCRIPTION_MAX: usize = 140;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    GitHub,
    GitLab,
}

impl Provider {
    pub fn default_base(self) -> &'static str {
        match self {
            Provider::GitHub => "https://api.github.com",
            Provider::GitLab => "https://gitlab.com/api/v4",
        }
    }
}

/// A receiver of notices.
#[derive(Clone)]
pub enum Target {
    /// Generic webhook: the notice as JSON, signed when a secret is set.
    Webhook {
        url: String,
        secret: Option<Vec<u8>>,
    },
    /// Slack incoming webhook (Mattermost and others take the same).
    Slack { url: String },
    /// The git provider's commit status for the revision.
    CommitStatus {
        provider: Provider,
        /// API base URL, without a trailing slash.
        base: String,
        /// GitHub `owner/name`; GitLab the project's path (or numeric id).
        repo: String,
        token: String,
    },
}

/// One POST, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

// Names the receiver without what may be a credential: a Slack webhook's path is its
// secret, and a URL may carry a user and password.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Webhook { url, .. } => write!(f, "webhook {}", origin(url)),
            Target::Slack { url } => write!(f, "slack {}", origin(url)),
            Target::CommitStatus { provider, repo, .. } => {
                write!(f, "{provider:?} commit status for {repo}")
            }
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}

/// `scheme://host[:port]` of a URL, nothing else.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    format!("{scheme}://{host}")
}

impl Target {
    /// Whether this receiver is told of `event`: chat and webhooks hear of outcomes, a
    /// commit status also of the start.
    pub fn takes(&self, event: Event) -> bool {
        match self {
            // A drift is not the commit's doing: its status stays as the sync left it.
            Target::CommitStatus { .. } => event != Event::Drift,
            Target::Webhook { .. } | Target::Slack { .. } => event != Event::SyncStarted,
        }
    }

    /// The request for `notice`; `None` when there is nothing to send (a commit status
    /// for a revision that is not a commit).
    pub fn message(&self, notice: &Notice, ctx: &Context) -> Option<Outgoing> {
        let json = ("Content-Type", "application/json".to_string());
        match self {
            Target::Webhook { url, secret } => {
                let body = webhook_body(notice, ctx);
                let mut headers = vec![json];
                if let Some(secret) = secret {
                    headers.push((SIGNATURE_HEADER, sign(secret, &body)));
                }
                Some(Outgoing {
                    url: url.clone(),
                    headers,
                    body,
                })
            }
            Target::Slack { url } => Some(Outgoing {
                url: url.clone(),
                headers: vec![json],
                body: slack_body(notice, ctx),
            }),
            Target::CommitStatus {
                provider,
                base,
                repo,
                token,
            } => {
                let revision = notice.revision.as_deref()?;
                let sha = match crate::source::is_commit(revision) {
                    true => revision.to_string(),
                    // An artifact's revision: the commit it was built from, when known.
                    false => ctx.origins.commit_of(revision)?,
                };
                let state = commit_state(notice.event);
                let description = short(&notice.message, DESCRIPTION_MAX);
                let context = match &ctx.cluster {
                    Some(cluster) => format!("driftless/{}/{cluster}", ctx.instance),
                    None => format!("driftless/{}", ctx.instance),
                };
                let (url, body, auth) = match provider {
                    Provider::GitHub => (
                        format!("{base}/repos/{repo}/statuses/{sha}"),
                        json!({"state": state, "description": description, "context": context}),
                        ("Authorization", format!("Bearer {token}")),
                    ),
                    Provider::GitLab => (
                        format!("{base}/projects/{}/statuses/{sha}", gitlab_project(repo)),
                        json!({
                            "state": gitlab_state(state),
                            "description": description,
                            "name": context,
                        }),
                        ("PRIVATE-TOKEN", token.clone()),
                    ),
                };
                let mut headers = vec![
                    json,
                    auth,
                    (
                        "User-Agent",
                        concat!("driftless/", env!("CARGO_PKG_VERSION")).into(),
                    ),
                ];
                if *provider == Provider::GitHub {
                    headers.push(("Accept", "application/vnd.github+json".into()));
                }
                Some(Outgoing {
                    url,
                    headers,
                    body: body.to_string().into_bytes(),
                })
            }
        }
    }
}

/// GitHub's words: `pending`, `success`, `failure`.
fn commit_state(event: Event) -> &'static str {
    if event == Event::SyncStarted {
        "pending"
    } else if event.is_failure() {
        "failure"
    } else {
        "success"
    }
}

/// GitLab's words for the same: a sync under way is `running`, a failure `failed`.
fn gitlab_state(state: &str) -> &str {
    match state {
        "pending" => "running",
        "failure" => "failed",
        other => other,
    }
}

/// A GitLab project path as its API takes it in a URL (`group%2Fsub%2Fname`); a numeric
/// id as it is.
fn gitlab_project(repo: &str) -> String {
    percent_encoding::utf8_percent_encode(repo, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `s` cut to at most `max` characters, with `…` when cut.
fn short(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// `sha256=<hex HMAC-SHA256 of body>`, as GitHub signs its hooks.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length; this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

#[derive(Serialize)]
struct WebhookBody<'a> {
    event: &'static str,
    instance: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<&'a str>,
    source: &'a str,
    revision: Option<&'a str>,
    message: &'a str,
    specs: &'a [String],
    errors: &'a [SourceError],
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    drift: Option<&'a super::DriftNotice>,
}

fn webhook_body(notice: &Notice, ctx: &Context) -> Vec<u8> {
    let body = WebhookBody {
        event: notice.event.as_str(),
        instance: &ctx.instance,
        cluster: ctx.cluster.as_deref(),
        source: &ctx.source,
        revision: notice.revision.as_deref(),
        message: &notice.message,
        specs: &notice.specs,
        errors: &notice.errors,
        time: &notice.time,
        drift: notice.drift.as_deref(),
    };
    // Plain strings and numbers: serialising cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Slack's mrkdwn reads `&`, `<` and `>` as markup.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn title(event: Event) -> &'static str {
    match event {
        Event::SyncStarted => "sync started",
        Event::RevisionReady => "revision applied and ready",
        Event::RevisionInvalid => "revision invalid",
        Event::RevisionUnverified => "revision not verified",
        Event::AppsHeld => "apps held",
        Event::SyncFailed => "sync failed",
        Event::PruneRefused => "prune refused",
        Event::NotReady => "specs not ready in time",
        Event::Recovered => "recovered",
        Event::Drift => "drift",
    }
}

/// Lines of detail after the message: at most this many errors or specs.
const SLACK_LIST: usize = 10;

fn slack_body(notice: &Notice, ctx: &Context) -> Vec<u8> {
    let revision = notice
        .revision
        .as_deref()
        .map(|r| r.get(..12).unwrap_or(r))
        .unwrap_or("-");
    let mark = if notice.event.is_failure() {
        ":x:"
    } else if notice.event == Event::Drift {
        ":warning:"
    } else {
        ":white_check_mark:"
    };
    let on = match &ctx.cluster {
        Some(cluster) => format!(" on {cluster}"),
        None => String::new(),
    };
    let text = format!(
        "driftless {}{on}: {} at {revision}: {}",
        ctx.instance,
        title(notice.event),
        notice.message
    );
    let cluster = match &ctx.cluster {
        Some(cluster) => format!("cluster `{}` · ", escape(cluster)),
        None => String::new(),
    };
    let mut detail = format!(
        "{mark} *{}* — {}",
        title(notice.event),
        escape(&notice.message)
    );
    let items: Vec<String> = if let Some(drift) = &notice.drift {
        // Where and by whom; the values stay in the webhook's JSON and the ledger.
        drift
            .fields
            .iter()
            .map(|f| format!("`{}`", escape(&f.pointer)))
            .collect()
    } else if notice.errors.is_empty() {
        notice
            .specs
            .iter()
            .map(|s| format!("`{}`", escape(s)))
            .collect()
    } else {
        notice.errors.iter().map(error_line).collect()
    };
    for item in items.iter().take(SLACK_LIST) {
        detail.push_str("\n• ");
        detail.push_str(item);
    }
    if items.len() > SLACK_LIST {
        detail.push_str(&format!("\n… and {} more", items.len() - SLACK_LIST));
    }
    let body = json!({
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": detail}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
                "instance `{}` · {cluster}source `{}` · revision `{}`",
                escape(&ctx.instance), escape(&ctx.source), escape(revision)
            )}]},
        ],
    });
    body.to_string().into_bytes()
}

fn error_line(e: &SourceError) -> String {
    match (&e.file, e.line, e.column) {
        (Some(f), Some(l), Some(c)) => format!("`{}:{l}:{c}` {}", escape(f), escape(&e.message)),
        (Some(f), _, _) => format!("`{}` {}", escape(f), escape(&e.message)),
        _ => escape(&e.message),
    }
}

/// The repository a git URL names, as a commit-status API wants it: the path without a
/// leading `/` or trailing `.git` (`owner/name`; GitLab may nest groups). `None` for a
/// local path or a URL without one.
pub fn repo_of_git_url(url: &str) -> Option<String> {
    let path = if let Some((_, rest)) = url.split_once("://") {
        if url.starts_with("file://") {
            return None;
        }
        rest.split_once('/')?.1
    } else if let Some((host, path)) = url.split_once(':') {
        // scp-like `git@host:owner/name.git`; a bare local path has no colon.
        if host.contains('/') {
            return None;
        }
        path
    } else {
        return None;
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    (path.contains('/') && !path.contains("//")).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn ctx() -> Context {
        Context {
            instance: "prod".into(),
            cluster: None,
            source: "https://git.example/team/config".into(),
            origins: Default::default(),
        }
    }

    fn notice(event: Event) -> Notice {
        Notice {
            event,
            revision: Some(SHA.into()),
            message: "2 errors; the last good revision stays in force".into(),
            specs: vec!["elasticweb/dev/shop".into()],
            errors: vec![SourceError {
                app: None,
                file: Some("web/shop.toml".into()),
                line: Some(4),
                column: Some(1),
                message: "unknown field `imagee`".into(),
            }],
            time: "2026-11-23T10:00:00Z".into(),
            drift: None,
        }
    }

    fn commit_status(provider: Provider, base: &str, repo: &str) -> Target {
        Target::CommitStatus {
            provider,
            base: base.into(),
            repo: repo.into(),
            token: "t0ken".into(),
        }
    }

    fn body(o: &Outgoing) -> Value {
        serde_json::from_slice(&o.body).unwrap()
    }

    fn header<'a>(o: &'a Outgoing, name: &str) -> Option<&'a str> {
        o.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_webhook_carries_the_notice_and_its_signature() {
        let target = Target::Webhook {
            url: "http://127.0.0.1:1/hook".into(),
            secret: Some(b"s3cret".to_vec()),
        };
        let out = target
            .message(&notice(Event::RevisionInvalid), &ctx())
            .unwrap();
        let b = body(&out);
        assert_eq!(b["event"], "revision_invalid");
        assert_eq!(b["instance"], "prod");
        assert_eq!(b["revision"], SHA);
        assert_eq!(b["errors"][0]["file"], "web/shop.toml");
        assert_eq!(b["errors"][0]["line"], 4);
        assert_eq!(b["specs"][0], "elasticweb/dev/shop");
        assert_eq!(
            header(&out, SIGNATURE_HEADER),
            Some(sign(b"s3cret", &out.body).as_str())
        );
        // An unsigned webhook has no signature header.
        let plain = Target::Webhook {
            url: "http://127.0.0.1:1/hook".into(),
            secret: None,
        };
        let out = plain.message(&notice(Event::Recovered), &ctx()).unwrap();
        assert!(header(&out, SIGNATURE_HEADER).is_none());
    }

    #[test]
    fn a_fleet_member_names_its_cluster_and_has_a_commit_status_of_its_own() {
        let edge = Context {
            cluster: Some("edge".into()),
            ..ctx()
        };
        let hook = Target::Webhook {
            url: "http://127.0.0.1:1/hook".into(),
            secret: None,
        };
        let out = hook.message(&notice(Event::Recovered), &edge).unwrap();
        assert_eq!(body(&out)["cluster"], "edge");
        let out = hook.message(&notice(Event::Recovered), &ctx()).unwrap();
        assert!(body(&out).get("cluster").is_none(), "{}", body(&out));
        let gh = commit_status(Provider::GitHub, "https://api.github.com", "team/config");
        let out = gh.message(&notice(Event::SyncStarted), &edge).unwrap();
        assert_eq!(body(&out)["context"], "driftless/prod/edge");
        let slack = Target::Slack {
            url: "http://127.0.0.1:1/slack".into(),
        };
        let b = body(&slack.message(&notice(Event::SyncFailed), &edge).unwrap());
        assert!(
            b["text"]
                .as_str()
                .unwrap()
                .starts_with("driftless prod on edge: "),
            "{b}"
        );
        let context = b["blocks"][1]["elements"][0]["text"].as_str().unwrap();
        assert!(context.contains("cluster `edge`"), "{context}");
    }

    #[test]
    fn the_signature_is_hmac_sha256_in_hex() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn github_and_gitlab_get_their_own_request_shapes() {
        let gh = commit_status(Provider::GitHub, "https://api.github.com", "team/config");
        let out = gh.message(&notice(Event::SyncStarted), &ctx()).unwrap();
        assert_eq!(
            out.url,
            format!("https://api.github.com/repos/team/config/statuses/{SHA}")
        );
        assert_eq!(header(&out, "authorization"), Some("Bearer t0ken"));
        let b = body(&out);
        assert_eq!(b["state"], "pending");
        assert_eq!(b["context"], "driftless/prod");
        let failed = gh.message(&notice(Event::NotReady), &ctx()).unwrap();
        assert_eq!(body(&failed)["state"], "failure");
        let ok = gh.message(&notice(Event::Recovered), &ctx()).unwrap();
        assert_eq!(body(&ok)["state"], "success");

        let gl = commit_status(
            Provider::GitLab,
            "https://gitlab.example/api/v4",
            "group/sub/config",
        );
        let out = gl.message(&notice(Event::SyncFailed), &ctx()).unwrap();
        assert_eq!(
            out.url,
            format!("https://gitlab.example/api/v4/projects/group%2Fsub%2Fconfig/statuses/{SHA}")
        );
        assert_eq!(header(&out, "private-token"), Some("t0ken"));
        assert_eq!(body(&out)["state"], "failed");
        assert_eq!(body(&out)["name"], "driftless/prod");
    }

    #[test]
    fn no_commit_status_for_a_revision_that_is_not_a_commit() {
        let gh = commit_status(Provider::GitHub, "https://api.github.com", "team/config");
        let mut n = notice(Event::RevisionReady);
        n.revision = Some("dir-4f2a".into());
        assert!(gh.message(&n, &ctx()).is_none());
        n.revision = None;
        assert!(gh.message(&n, &ctx()).is_none());
    }

    #[test]
    fn an_artifact_s_status_goes_to_the_commit_it_was_built_from() {
        let gh = commit_status(Provider::GitHub, "https://api.github.com", "team/config");
        let ctx = ctx();
        let mut n = notice(Event::RevisionReady);
        let artifact = format!("latest@sha256:{}", "e".repeat(64));
        n.revision = Some(artifact.clone());
        // Its origin not known: nothing to send.
        assert!(gh.message(&n, &ctx).is_none());
        let origin = crate::source::oci::commit_of_origin(&format!("main@sha1:{SHA}")).unwrap();
        ctx.origins.record(&artifact, &origin);
        let out = gh.message(&n, &ctx).unwrap();
        assert_eq!(
            out.url,
            format!("https://api.github.com/repos/team/config/statuses/{SHA}")
        );
        for form in [
            format!("sha1:{SHA}"),
            format!("main/{SHA}"),
            SHA.to_uppercase(),
        ] {
            assert_eq!(
                crate::source::oci::commit_of_origin(&form).as_deref(),
                Some(SHA),
                "{form}"
            );
        }
        for none in ["v1.2.0", "main@sha1:abc", ""] {
            assert_eq!(crate::source::oci::commit_of_origin(none), None, "{none}");
        }
    }

    #[test]
    fn a_description_is_one_line_within_the_providers_limit() {
        let mut n = notice(Event::SyncFailed);
        n.message = format!("first line\n{}", "x".repeat(300));
        let gh = commit_status(Provider::GitHub, "b", "o/r");
        let d = body(&gh.message(&n, &ctx()).unwrap())["description"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(d.chars().count(), DESCRIPTION_MAX);
        assert!(d.starts_with("first line x") && d.ends_with('…'));
    }

    #[test]
    fn slack_gets_text_and_blocks_with_markup_escaped() {
        let target = Target::Slack {
            url: "https://hooks.slack.example/services/T/B/secret".into(),
        };
        let mut n = notice(Event::RevisionInvalid);
        n.errors[0].message = "a <b> & c".into();
        let b = body(&target.message(&n, &ctx()).unwrap());
        assert!(b["text"].as_str().unwrap().contains("revision invalid"));
        let section = b["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(
            section.contains("`web/shop.toml:4:1` a &lt;b&gt; &amp; c"),
            "{section}"
        );
        assert_eq!(b["blocks"][1]["type"], "context");
        // The receiver's name in logs never shows the webhook's secret path.
        assert_eq!(target.to_string(), "slack https://hooks.slack.example");
    }

    #[test]
    fn chat_is_not_told_of_a_sync_starting() {
        let slack = Target::Slack { url: "u".into() };
        assert!(!slack.takes(Event::SyncStarted));
        assert!(slack.takes(Event::Recovered));
    }

    #[test]
    fn a_drift_goes_to_chat_and_webhooks_with_its_fields_not_to_commit_statuses() {
        let mut n = notice(Event::Drift);
        n.errors.clear();
        n.drift = Some(Box::new(super::super::DriftNotice {
            object: "Deployment.apps dev/web".into(),
            fields: vec![crate::apply::drift::FieldDrift {
                pointer: "/spec/replicas".into(),
                applied: serde_json::json!(2),
                found: serde_json::json!(5),
            }],
            managers: vec!["kubectl-scale".into()],
            mode: "corrected".into(),
            began: "2026-11-23T09:59:59Z".into(),
        }));
        let gh = commit_status(Provider::GitHub, "https://api.github.com", "team/config");
        assert!(!gh.takes(Event::Drift));
        let hook = Target::Webhook {
            url: "http://hooks.example/x".into(),
            secret: None,
        };
        let b = body(&hook.message(&n, &ctx()).unwrap());
        assert_eq!(b["event"], "drift");
        assert_eq!(b["drift"]["fields"][0]["found"], 5);
        assert_eq!(b["drift"]["managers"][0], "kubectl-scale");
        // Other events carry no `drift` field at all.
        let plain = body(&hook.message(&notice(Event::Recovered), &ctx()).unwrap());
        assert!(plain.get("drift").is_none(), "{plain}");
        let slack = Target::Slack { url: "u".into() };
        let section = body(&slack.message(&n, &ctx()).unwrap())["blocks"][0]["text"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            section.starts_with(":warning: *drift*") && section.contains("• `/spec/replicas`"),
            "{section}"
        );
    }

    #[test]
    fn a_receivers_name_hides_credentials() {
        let t = Target::Webhook {
            url: "https://user:pw@hooks.example:8443/x/y?token=z".into(),
            secret: None,
        };
        assert_eq!(t.to_string(), "webhook https://hooks.example:8443");
    }

    #[test]
    fn the_repository_is_read_from_the_git_url() {
        for (url, repo) in [
            ("https://github.com/team/config.git", Some("team/config")),
            ("https://github.com/team/config", Some("team/config")),
            (
                "ssh://git@gitlab.example:2222/group/sub/config.git",
                Some("group/sub/config"),
            ),
            ("git@github.com:team/config.git", Some("team/config")),
            ("http://127.0.0.1:9418/team/config/", Some("team/config")),
            ("git://127.0.0.1/config.git", None),
            ("file:///srv/git/team/config", None),
            ("/srv/git/team/config", None),
        ] {
            assert_eq!(repo_of_git_url(url).as_deref(), repo, "{url}");
        }
    }
}
