//! `driftless reconcile`, `suspend` and `resume`: steering a running daemon over its API
//! (binary edge).

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use super::exit;
use driftless::report::outbound;

/// Where the daemon is, and the token its controls need.
#[derive(Args, Debug)]
pub struct ServerArgs {
    /// The daemon's HTTP address (its --metrics-addr), `http://` assumed without a scheme.
    #[arg(
        long,
        value_name = "URL",
        env = "DRIFTLESS_SERVER",
        default_value = "http://127.0.0.1:9477",
        value_parser = server_url
    )]
    pub server: String,
    /// File holding the API token (the daemon's --api-token-file); or set DRIFTLESS_API_TOKEN.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM certificates to trust besides the system's for an `https://` server (the CA
    /// that signed the daemon's --tls-cert-file).
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM, its chain after it) to present to a daemon that
    /// verifies them (its --tls-client-ca-file): the controls then need no token.
    #[arg(
        long,
        value_name = "FILE",
        env = "DRIFTLESS_CLIENT_CERT_FILE",
        requires = "client_key_file"
    )]
    pub client_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        env = "DRIFTLESS_CLIENT_KEY_FILE",
        requires = "client_cert_file"
    )]
    pub client_key_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// How long to wait for the sync to end.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct SuspendArgs {
    /// The spec's id: kind/namespace/name (as `driftless status` lists it).
    pub id: String,
    /// Why; shown in the API, the status file, `driftless status` and the web UI.
    #[arg(long)]
    pub reason: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The spec's id: kind/namespace/name.
    pub id: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

impl ServerArgs {
    /// The token, or none when a client certificate is presented instead and no token
    /// is given.
    fn token(&self) -> anyhow::Result<Option<String>> {
        if self.client_cert_file.is_some()
            && self.token_file.is_none()
            && std::env::var("DRIFTLESS_API_TOKEN")
                .unwrap_or_default()
                .trim()
                .is_empty()
        {
            return Ok(None);
        }
        self.token_required().map(Some)
    }

    fn token_required(&self) -> anyhow::Result<String> {
        let token = match &self.token_file {
            Some(f) => std::fs::read_to_string(f)
                .with_context(|| format!("reading the token file {}", f.display()))?,
            None => std::env::var("DRIFTLESS_API_TOKEN").unwrap_or_default(),
        };
        // Else the ID token `driftless login` kept.
        let token = match token.trim() {
            "" => super::login::default_token_file()
                .and_then(|f| std::fs::read_to_string(f).ok())
                .unwrap_or_default(),
            given => given.to_string(),
        };
        let token = token.trim().to_string();
        anyhow::ensure!(
            !token.is_empty(),
            "no API token: pass --token-file FILE, set DRIFTLESS_API_TOKEN, or sign in with driftless login"
        );
        Ok(token)
    }

    /// POSTs `body` to `path`; the answer's status and JSON.
    async fn post(
        &self,
        path: &str,
        body: Value,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let token = self.token()?;
        let url = format!("{}{path}", self.server.trim_end_matches('/'));
        let mut headers = vec![("Content-Type", "application/json".to_string())];
        headers.extend(token.map(|t| ("Authorization", format!("Bearer {t}"))));
        let identity = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => Some(outbound::IdentityFiles { cert, key }),
            _ => None,
        };
        let client = outbound::client_for(self.ca_file.as_deref(), identity)?;
        let (status, body) = outbound::request(
            &client,
            Method::POST,
            &url,
            &headers,
            body.to_string().into_bytes(),
            timeout,
        )
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the daemon at {}: {e}", self.server))?;
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok((status, value))
    }
}

/// The API's refusal in its own words.
fn refusal(status: StatusCode, body: &Value) -> anyhow::Error {
    match body["error"].as_str() {
        Some(e) => anyhow::anyhow!("the daemon answered {status}: {e}"),
        None => anyhow::anyhow!("the daemon answered {status}"),
    }
}

/// Spec ids are paths in the API; a leading or trailing `/` would name another route.
fn spec_path(id: &str, verb: &str) -> anyhow::Result<String> {
    let id = id.trim_matches('/');
    anyhow::ensure!(
        id.split('/').count() >= 3,
        "`{id}` is not a spec id (kind/namespace/name)"
    );
    Ok(format!("/api/v1/specs/{id}/{verb}"))
}

pub async fn reconcile(args: &ReconcileArgs) -> anyhow::Result<u8> {
    let (status, body) = args
        .server
        .post("/api/v1/sync?wait=true", json!({}), args.timeout)
        .await?;
    let last = &body["last_sync"];
    if last.is_null() {
        return Err(refusal(status, &body));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "sync {}: {} applied, {} unchanged, {} pruned, {} failed in {:.1}s{}",
        last["result"].as_str().unwrap_or("?"),
        last["applied"],
        last["unchanged"],
        last["pruned"],
        last["failed"],
        last["duration_seconds"].as_f64().unwrap_or(0.0),
        last["message"]
            .as_str()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    )?;
    Ok(if status.is_success() {
        exit::OK
    } else {
        exit::DIFFERENCES
    })
}

pub async fn suspend(args: &SuspendArgs) -> anyhow::Result<u8> {
    let path = spec_path(&args.id, "suspend")?;
    let (status, body) = args
        .server
        .post(
            &path,
            json!({"reason": args.reason}),
            Duration::from_secs(30),
        )
        .await?;
    if !status.is_success() {
        return Err(refusal(status, &body));
    }
    writeln!(std::io::stdout(), "suspended {}: {}", args.id, args.reason)?;
    Ok(exit::OK)
}

pub async fn resume(args: &ResumeArgs) -> anyhow::Result<u8> {
    let path = spec_path(&args.id, "resume")?;
    let (status, body) = args
        .server
        .post(&path, json!({}), Duration::from_secs(30))
        .await?;
    if !status.is_success() {
        return Err(refusal(status, &body));
    }
    writeln!(std::io::stdout(), "resumed {}", args.id)?;
    Ok(exit::OK)
}

/// `--server`: a URL, or as `--metrics-addr` is written (`127.0.0.1:9477`), taken as
/// plain HTTP.
fn server_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an address such as http://127.0.0.1:9477".into());
    }
    Ok(match text.split_once("://") {
        Some(("http" | "https", _)) => text.to_string(),
        Some((scheme, _)) => {
            return Err(format!(
                "scheme {scheme}:// is not served: the daemon speaks http:// (or https:// behind a proxy)"
            ));
        }
        None => format!("http://{text}"),
    })
}

#[cfg(test)]
mod tests {
    use super::server_url;

    #[test]
    fn a_server_without_a_scheme_is_http() {
        assert_eq!(
            server_url("127.0.0.1:9477").unwrap(),
            "http://127.0.0.1:9477"
        );
        assert_eq!(
            server_url("https://d.example").unwrap(),
            "https://d.example"
        );
        assert!(server_url("ftp://x").unwrap_err().contains("ftp://"));
        assert!(server_url(" ").is_err());
    }
}
