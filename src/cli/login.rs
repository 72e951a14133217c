//! `driftless login`: signs a person in with the daemon's OpenID Connect provider from a
//! terminal, as `kubectl oidc-login` does: a browser is sent to the provider, which sends
//! it back to a one-off listener on loopback with a code; the code is traded (PKCE) for
//! an ID token, kept for `reconcile`, `suspend` and `resume` (binary edge).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::Query;
use clap::Args;
use driftless::report::signin::Asked;
use tokio::sync::mpsc;

use super::exit;

#[derive(Args, Debug)]
pub struct LoginArgs {
    /// The provider's issuer URL (the daemon's --oidc-issuer).
    #[arg(long, value_name = "URL", env = "DRIFTLESS_OIDC_ISSUER")]
    pub oidc_issuer: String,
    /// As the daemon's: the token is for its client.
    #[command(flatten)]
    pub client: super::signin::ClientArgs,
    /// Where to keep the ID token [default: ${XDG_CACHE_HOME:-~/.cache}/driftless/id-token,
    /// which the controls read when given no token].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// How long to wait for the browser.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Where `login` keeps the token and the controls look for it.
pub(super) fn default_token_file() -> Option<PathBuf> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|d| !d.is_empty())?).join(".cache"),
    };
    Some(cache.join("driftless").join("id-token"))
}

/// What the provider's redirect brings back.
#[derive(serde::Deserialize)]
struct Answer {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub async fn login(args: &LoginArgs) -> anyhow::Result<u8> {
    let target = match &args.token_file {
        Some(path) => path.clone(),
        None => default_token_file().context(
            "no --token-file, and neither XDG_CACHE_HOME nor HOME is set to find the default",
        )?,
    };
    let (provider, _) = args
        .client
        .provider(&args.oidc_issuer, Duration::from_secs(60))?;
    // Loopback, a port of the kernel's choosing: providers accept any port of a loopback
    // redirect URI (RFC 8252 §7.3).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("listening on loopback for the provider's answer")?;
    let redirect_uri = format!("http://{}/callback", listener.local_addr()?);
    let asked = Asked::new();
    let scopes = args.client.scopes();
    let url = provider
        .authorization_url(&redirect_uri, &scopes, &asked)
        .await?;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "Open this address in a browser to sign in:\n\n  {url}\n"
    );
    drop(err);

    let (tx, mut rx) = mpsc::channel::<Answer>(1);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(move |Query(answer): Query<Answer>| {
            let tx = tx.clone();
            async move {
                let _ = tx.try_send(answer);
                axum::response::Html(
                    "<!doctype html><meta charset=utf-8><title>driftless</title>\
                     <p>Back to the terminal: driftless has the provider's answer. You may close this tab.</p>",
                )
            }
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let answer = tokio::time::timeout(args.timeout, rx.recv()).await;
    server.abort();
    let answer = match answer {
        Ok(Some(answer)) => answer,
        _ => anyhow::bail!(
            "no answer from the browser within {}",
            humantime::format_duration(args.timeout)
        ),
    };
    if let Some(error) = answer.error {
        let detail = answer
            .error_description
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        anyhow::bail!("the identity provider said {error}{detail}");
    }
    anyhow::ensure!(
        answer.state.as_deref() == Some(asked.state.as_str()),
        "the answer is not for this sign-in (state)"
    );
    let code = answer.code.context("the answer carries no code")?;
    let (token, claims) = provider
        .redeem(&code, &redirect_uri, &asked.verifier, &asked.nonce)
        .await?;
    keep(&target, &token)?;
    let who = ["preferred_username", "email", "sub"]
        .iter()
        .find_map(|c| claims.get(*c).and_then(|v| v.as_str()))
        .unwrap_or("?");
    let until = claims
        .get("exp")
        .and_then(serde_json::Value::as_i64)
        .and_then(|e| k8s_openapi::jiff::Timestamp::from_second(e).ok())
        .map(|t| format!(" until {t}"))
        .unwrap_or_default();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "Signed in as {who}{until}; the ID token is in {} (reconcile, suspend and resume use it).",
        target.display()
    );
    Ok(exit::OK)
}

/// Written readable by its owner only, replaced whole.
fn keep(path: &Path, token: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let partial = path.with_extension("partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .with_context(|| format!("writing {}", partial.display()))?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
