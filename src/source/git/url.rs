//! The remote's URL: what of it may be shown, and keeping it and every configured secret
//! out of the messages libgit2 hands back.

use super::GitAuth;

/// Rewrites a libgit2 message so that it can be kept: the URL as shown, no secret.
pub(super) struct Redactor {
    url: String,
    display_url: String,
    /// Longest first, so a secret that contains another is not left half-replaced.
    secrets: Vec<String>,
}

impl Redactor {
    pub(super) fn new(url: &str, display_url: &str, auth: &GitAuth) -> Redactor {
        let mut secrets = auth.secrets();
        if let Some(password) = url_password(url) {
            // libgit2 may quote it either way.
            secrets.push(
                percent_encoding::percent_decode_str(&password)
                    .decode_utf8_lossy()
                    .into_owned(),
            );
            secrets.push(password);
        }
        // Replacing "" would put a marker between every character.
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor {
            url: url.to_string(),
            display_url: display_url.to_string(),
            secrets,
        }
    }

    pub(super) fn redact(&self, message: &str) -> String {
        let mut out = message.to_string();
        if !self.url.is_empty() {
            out = out.replace(&self.url, &self.display_url);
        }
        for s in &self.secrets {
            out = out.replace(s.as_str(), "<redacted>");
        }
        out
    }
}

/// `scheme://user:password@host/…` → `scheme://host/…`; scp-like `git@host:path` is left
/// alone (it cannot carry a password, and the user is part of the address).
pub fn strip_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{head}{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Whether a URL carries credentials: a password in its userinfo
/// (`scheme://user:password@host/…`), or any userinfo of an http(s) URL, where a lone
/// "user" is often a token (`https://TOKEN@host/…`).
pub fn url_has_credentials(url: &str) -> bool {
    let http = url.starts_with("https://") || url.starts_with("http://");
    url_password(url).is_some() || (http && strip_userinfo(url) != url)
}

fn url_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then(|| password.to_string())
}

/// The port of an `ssh://` URL (22 when absent, and for scp-like addresses).
pub(super) fn ssh_port(url: &str) -> u16 {
    let Some(rest) = url
        .strip_prefix("ssh://")
        .or_else(|| url.strip_prefix("git+ssh://"))
    else {
        return 22;
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // `[::1]:2222`: the port follows the bracket.
    let after_host = match host_port.rfind(']') {
        Some(i) => &host_port[i + 1..],
        None => host_port,
    };
    after_host
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_userinfo() {
        assert_eq!(
            strip_userinfo("https://user:pw@example.com/org/r.git"),
            "https://example.com/org/r.git"
        );
        assert_eq!(
            strip_userinfo("https://tok@example.com:8443/r.git?x=a@b"),
            "https://example.com:8443/r.git?x=a@b"
        );
        assert_eq!(
            strip_userinfo("ssh://git@example.com/r.git"),
            "ssh://example.com/r.git"
        );
        assert_eq!(
            strip_userinfo("git@example.com:org/r.git"),
            "git@example.com:org/r.git"
        );
        assert_eq!(strip_userinfo("file:///srv/r.git"), "file:///srv/r.git");
        assert_eq!(
            url_password("https://user:p%40ss@example.com/r.git").as_deref(),
            Some("p%40ss")
        );
        assert_eq!(url_password("https://user@example.com/r.git"), None);
        assert!(url_has_credentials("https://user:pw@example.com/r.git"));
        assert!(url_has_credentials("https://ghp_token@example.com/r.git"));
        assert!(url_has_credentials("ssh://git:pw@example.com/r.git"));
        assert!(!url_has_credentials("ssh://git@example.com/r.git"));
        assert!(!url_has_credentials("git@example.com:r.git"));
        assert!(!url_has_credentials("https://example.com/r.git?x=a@b"));
        assert_eq!(url_password("git@example.com:r.git"), None);
    }

    #[test]
    fn a_url_password_is_redacted_quoted_and_unquoted() {
        // A `%` not followed by two hex digits stays as it is.
        let url = "https://bob:p%40ss%2@example.com/r.git";
        let redactor = Redactor::new(url, &strip_userinfo(url), &GitAuth::None);
        assert_eq!(
            redactor.redact(&format!("{url}: p@ss%2 and p%40ss%2")),
            "https://example.com/r.git: <redacted> and <redacted>"
        );
    }

    #[test]
    fn ssh_ports() {
        assert_eq!(ssh_port("ssh://git@example.com:2222/r.git"), 2222);
        assert_eq!(ssh_port("ssh://example.com/r.git"), 22);
        assert_eq!(ssh_port("ssh://git@[::1]:2200/r.git"), 2200);
        assert_eq!(ssh_port("ssh://[::1]/r.git"), 22);
        assert_eq!(ssh_port("git@example.com:org/r.git"), 22);
        assert_eq!(ssh_port("https://example.com:8443/r.git"), 22);
    }
}
