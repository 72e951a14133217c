//! `driftless run`'s sign-in flags: an OpenID Connect provider people sign in with
//! (binary edge).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use driftless::report::signin::{Provider, SignIn};

use super::secrets::read_secret_file;

#[derive(Args, Debug, Default)]
pub struct SignInArgs {
    /// Let people sign in to the UI and API with this OpenID Connect provider (its
    /// issuer URL); what each sees and steers is what the cluster's RBAC lets their user
    /// and groups get and patch. Reads then need an identity (a person, the API token or
    /// a client certificate). Needs --external-url.
    #[arg(
        long,
        value_name = "URL",
        env = "DRIFTLESS_OIDC_ISSUER",
        requires = "external_url"
    )]
    pub oidc_issuer: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The ID token's claim that is the user's name for RBAC, as kube-apiserver's
    /// --oidc-username-claim.
    #[arg(long, value_name = "CLAIM", default_value = "sub")]
    pub oidc_username_claim: String,
    /// Put before every user name (as kube-apiserver's --oidc-username-prefix).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub oidc_username_prefix: String,
    /// The ID token's claim listing the user's groups.
    #[arg(long, value_name = "CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// Put before every group name (as kube-apiserver's --oidc-groups-prefix).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub oidc_groups_prefix: String,
    /// How far the provider's clock may be from this machine's.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = humantime::parse_duration)]
    pub oidc_clock_skew: Duration,
    /// How long a sign-in lasts.
    #[arg(long, value_name = "DURATION", default_value = "12h", value_parser = humantime::parse_duration)]
    pub session_duration: Duration,
    /// The address people reach the listener at (https://, or http:// on loopback), the
    /// provider sending them back to its /auth/callback.
    #[arg(long, value_name = "URL", env = "DRIFTLESS_EXTERNAL_URL")]
    pub external_url: Option<String>,
}

/// driftless as the provider's client: shared by `run` and `login`.
#[derive(Args, Debug, Default)]
pub struct ClientArgs {
    /// The client driftless is registered as with the provider; ID tokens must be for it.
    #[arg(
        long,
        value_name = "ID",
        env = "DRIFTLESS_OIDC_CLIENT_ID",
        default_value = "driftless"
    )]
    pub oidc_client_id: String,
    /// File holding the client's secret (a confidential client); without it, a public
    /// client (PKCE alone).
    #[arg(long, value_name = "FILE", env = "DRIFTLESS_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// Scopes asked for at sign-in besides openid (repeatable).
    #[arg(long = "oidc-scope", value_name = "SCOPE", default_values = ["profile", "email"])]
    pub oidc_scopes: Vec<String>,
    /// Trust the provider's certificate when this CA (PEM) signed it, or it is that
    /// self-signed certificate, besides the system's CAs.
    #[arg(long, value_name = "FILE")]
    pub oidc_ca_file: Option<PathBuf>,
}

impl ClientArgs {
    /// The provider at `issuer`, and the client's secret as read.
    pub(super) fn provider(
        &self,
        issuer: &str,
        skew: Duration,
    ) -> anyhow::Result<(Provider, Option<Vec<u8>>)> {
        let secret = match &self.oidc_client_secret_file {
            Some(f) => Some(read_secret_file(f, "OIDC client secret")?),
            None => None,
        };
        let http = driftless::report::outbound::client_for(self.oidc_ca_file.as_deref(), None)?;
        let provider = Provider::new(
            issuer.to_string(),
            self.oidc_client_id.clone(),
            secret
                .as_ref()
                .map(|s| String::from_utf8_lossy(s).into_owned()),
            skew,
            http,
        );
        Ok((provider, secret))
    }

    /// openid and the scopes asked for.
    pub(super) fn scopes(&self) -> Vec<String> {
        let mut scopes = vec!["openid".to_string()];
        scopes.extend(self.oidc_scopes.iter().filter(|s| *s != "openid").cloned());
        scopes
    }
}

/// The sign-in the flags ask for, checked now.
pub(super) fn sign_in(args: &SignInArgs) -> anyhow::Result<Option<Arc<SignIn>>> {
    let Some(issuer) = &args.oidc_issuer else {
        return Ok(None);
    };
    let external = args.external_url.as_deref().unwrap_or_default();
    check_url(issuer, "--oidc-issuer")?;
    check_url(external, "--external-url")?;
    let (provider, secret) = args.client.provider(issuer, args.oidc_clock_skew)?;
    let scopes = args.client.scopes();
    Ok(Some(Arc::new(SignIn::new(
        provider,
        external,
        args.oidc_username_claim.clone(),
        args.oidc_groups_claim.clone(),
        args.oidc_username_prefix.clone(),
        args.oidc_groups_prefix.clone(),
        scopes,
        args.session_duration,
        secret.as_deref(),
    ))))
}

/// https://, or http:// to a loopback host (a session cookie is `Secure`, which
/// browsers keep over plain HTTP only there).
fn check_url(url: &str, flag: &str) -> anyhow::Result<()> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag} {url:?} is not a URL"))?;
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if loopback => Ok(()),
        _ => anyhow::bail!("{flag} takes an https:// URL (http:// only to a loopback address)"),
    }
}
