//! Sign-in with an OpenID Connect provider and Kubernetes RBAC per spec (issue 76), with
//! real parts: Keycloak on loopback (tests/support/keycloak.rs) as the provider, the real
//! daemon on the local cluster, whose SubjectAccessReviews decide, and headless Chromium
//! signing in through Keycloak's own login form.
//!
//! alice (group team-a) may get and patch ConfigMaps in team A's namespace only; bob
//! (group viewers) may get them in both namespaces and patch nothing.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use support::keycloak::Keycloak;
use support::{Browser, Daemon, http};

const SECRET: &str = "driftless-secret";

fn configmap(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  k: v\n"
    )
}

/// A Role of `verbs` on ConfigMaps in `ns`, bound to `group`.
async fn grant(client: &kube::Client, ns: &str, name: &str, group: &str, verbs: &[&str]) {
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]
    }))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

async fn get_json(addr: SocketAddr, path: &str, bearer: &str) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let headers: Vec<(&str, &str)> = match bearer {
        "" => vec![],
        _ => vec![("Authorization", &auth)],
    };
    let (code, body) = http(addr, "GET", path, &headers, b"").await;
    let parsed = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (code, parsed)
}

fn ids(status: &Value) -> Vec<String> {
    let mut ids: Vec<String> = status["specs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(String::from))
        .collect();
    ids.sort();
    ids
}

/// The payload of a JWT, as JSON.
fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// Signs in through Keycloak's form in `browser`, starting at the daemon's page.
async fn sign_in(browser: &Browser, daemon: SocketAddr, user: &str, password: &str) {
    browser.goto(&format!("http://{daemon}/")).await;
    browser
        .wait_for(
            "Keycloak's login form",
            "return document.querySelector('#username') !== null",
            vec![],
        )
        .await;
    browser.type_into("#username", user).await;
    browser.type_into("#password", password).await;
    browser.click("#kc-login").await;
    browser
        .wait_for_text("#who", &[&format!("Signed in as {user}")])
        .await;
}

#[tokio::test]
async fn people_sign_in_with_the_provider_and_see_and_steer_what_rbac_lets_them() {
    let keycloak = Keycloak::shared().await;
    let client = support::client().await;
    let ns_a = support::namespace(&client, "signin-a").await;
    let ns_b = support::namespace(&client, "signin-b").await;
    grant(
        &client,
        &ns_a,
        "team-a",
        "team-a",
        &["get", "list", "watch", "patch"],
    )
    .await;
    grant(
        &client,
        &ns_a,
        "viewers",
        "viewers",
        &["get", "list", "watch"],
    )
    .await;
    grant(
        &client,
        &ns_b,
        "viewers",
        "viewers",
        &["get", "list", "watch"],
    )
    .await;

    let specs = tempfile::tempdir().unwrap();
    std::fs::write(specs.path().join("a.yaml"), configmap(&ns_a, "a")).unwrap();
    std::fs::write(specs.path().join("b.yaml"), configmap(&ns_b, "b")).unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("client-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let token_file = secrets.path().join("api-token");
    std::fs::write(&token_file, "signin-test-service-token\n").unwrap();

    let addr: SocketAddr = format!("127.0.0.1:{}", support::free_port())
        .parse()
        .unwrap();
    let issuer = keycloak.issuer("driftless");
    let daemon = Daemon::builder(&ns_a)
        .metrics_addr(addr)
        .args(&[
            "--dir",
            &specs.path().display().to_string(),
            "--resync",
            "1h",
            "--api-token-file",
            &token_file.display().to_string(),
            "--oidc-issuer",
            &issuer,
            "--oidc-client-secret-file",
            &secret_file.display().to_string(),
            "--oidc-username-claim",
            "preferred_username",
            "--oidc-clock-skew",
            "1s",
            "--external-url",
            &format!("http://{addr}"),
        ])
        .start();
    let spec_a = format!("manifest/{ns_a}/ConfigMap/a");
    let spec_b = format!("manifest/{ns_b}/ConfigMap/b");
    daemon
        .wait_status("both specs ready", |s| {
            support::all_ready(s) && s["specs"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;

    // Nobody: reads refused, the page sends the browser to sign in; probes stay open.
    let (code, body) = get_json(addr, "/api/v1/status", "").await;
    assert_eq!(code, 401, "{body}");
    assert_eq!(body["error"], "sign in first");
    let (code, _) = http(addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(code, 401);
    let (code, _) = http(addr, "GET", "/", &[("Accept", "text/html")], b"").await;
    assert_eq!(code, 302);
    let (code, _) = http(addr, "GET", "/readyz", &[], b"").await;
    assert_eq!(code, 200);
    // The service token sees everything, as before.
    let (code, all) = get_json(addr, "/api/v1/status", "signin-test-service-token").await;
    assert_eq!(code, 200);
    assert_eq!(ids(&all), [spec_a.clone(), spec_b.clone()]);

    // Bearer ID tokens from the provider: each person sees what RBAC lets them get.
    let token = |realm: &'static str,
                 client: &'static str,
                 secret: &'static str,
                 user: &'static str| async move {
        let answer = keycloak
            .password_tokens(realm, client, secret, user, &format!("{user}-pw"))
            .await;
        answer["id_token"].as_str().unwrap().to_string()
    };
    let alice = token("driftless", "driftless", SECRET, "alice").await;
    let bob = token("driftless", "driftless", SECRET, "bob").await;
    let (code, seen) = get_json(addr, "/api/v1/status", &alice).await;
    assert_eq!(code, 200, "{seen}");
    assert_eq!(ids(&seen), std::slice::from_ref(&spec_a));
    let (_, seen) = get_json(addr, "/api/v1/status", &bob).await;
    assert_eq!(ids(&seen), [spec_a.clone(), spec_b.clone()]);
    let (code, _) = get_json(addr, &format!("/api/v1/specs/{spec_b}"), &alice).await;
    assert_eq!(code, 404, "a spec alice may not see is not there for her");
    let (code, page) = http(
        addr,
        "GET",
        "/metrics",
        &[("Authorization", &format!("Bearer {alice}"))],
        b"",
    )
    .await;
    assert_eq!(code, 200);
    let ready_lines: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("driftless_spec_ready{"))
        .collect();
    assert_eq!(ready_lines.len(), 1, "{ready_lines:?}");
    assert!(ready_lines[0].contains(&ns_a), "{ready_lines:?}");

    // Tokens that are not this provider's for this daemon, each refused in one line.
    let other_audience = token("driftless", "other", "other-secret", "alice").await;
    let other_issuer = token("elsewhere", "driftless", SECRET, "alice").await;
    let mut parts: Vec<String> = alice.split('.').map(String::from).collect();
    let mut forged_claims = claims_of(&alice);
    forged_claims["groups"] = json!(["viewers", "team-a"]);
    parts[1] = URL_SAFE_NO_PAD.encode(forged_claims.to_string().as_bytes());
    let forged = parts.join(".");
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        parts[1]
    );
    for (what, bad, said) in [
        (
            "another audience",
            other_audience.as_str(),
            "not for this daemon",
        ),
        (
            "another issuer",
            other_issuer.as_str(),
            "is not one of the identity provider's",
        ),
        (
            "a forged signature",
            forged.as_str(),
            "signature does not verify",
        ),
        ("alg none", none.as_str(), "\"none\" are not accepted"),
    ] {
        let (code, body) = get_json(addr, "/api/v1/status", bad).await;
        assert_eq!(code, 401, "{what}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(said), "{what}: {error}");
    }
    // Expired: the provider's token for `short` lives 2 s (the daemon forgives 1 s).
    let short = token("driftless", "short", "short-secret", "alice").await;
    let (code, body) = get_json(addr, "/api/v1/status", &short).await;
    assert_eq!(code, 200, "in time: {body}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (code, body) = get_json(addr, "/api/v1/status", &short).await;
    assert_eq!(code, 401, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("expired"),
        "{body}"
    );

    // In the browser: alice signs in through Keycloak's form, sees her spec alone, and
    // steers it; the whole tree's reconcile asks for rights she lacks in B.
    let browser = Browser::start().await;
    sign_in(&browser, addr, "alice", "alice-pw").await;
    browser.wait_for_text("#who", &["team-a"]).await;
    browser.wait_for_spec_rows(1).await;
    let rows = browser.spec_rows().await;
    assert!(
        rows[0].contains("ConfigMap") && rows[0].contains(&ns_a),
        "{rows:?}"
    );
    browser.click("#reconcile").await;
    let said = browser
        .wait_for_text("#action-result", &["refused (403)"])
        .await;
    assert!(
        said.contains(&format!(
            "alice may not patch ConfigMap in namespace {ns_b}"
        )),
        "{said}"
    );
    // Suspend her spec through the API as the page does (same origin, her cookie).
    let suspend = format!("api/v1/specs/{spec_a}/suspend");
    let answer = browser
        .eval_with(
            "return fetch(arguments[0], {method: 'POST', credentials: 'same-origin', \
             headers: {'Content-Type': 'application/json'}, body: JSON.stringify({reason: 'alice pauses'})}) \
             .then(r => r.status)",
            vec![json!(suspend)],
        )
        .await;
    assert_eq!(answer, 200);
    daemon
        .wait_status("a suspended by alice", |s| {
            support::spec(s, &spec_a)["suspended"]["reason"] == "alice pauses"
        })
        .await;

    // CSRF: a page of another origin on the same site (Keycloak's, another port of
    // 127.0.0.1) posting with alice's cookie is refused, and resumes nothing.
    browser
        .goto(&format!("{}/account", keycloak.issuer("driftless")))
        .await;
    let answer = browser
        .eval_with(
            "return fetch(arguments[0], {method: 'POST', credentials: 'include', mode: 'cors'}) \
             .then(r => r.status, e => 'blocked: ' + e)",
            vec![json!(format!("http://{addr}/api/v1/specs/{spec_a}/resume"))],
        )
        .await;
    // The browser may hide the answer from the other origin (no CORS), so the daemon's
    // record says what happened.
    let _ = answer;
    let records = support::eventually("the cross-site request recorded", support::WAIT, || async {
        let (_, body) = get_json(addr, "/api/v1/controls", "signin-test-service-token").await;
        let found = body["controls"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["what"].as_str().is_some_and(|w| w.ends_with("/resume")))
            .cloned();
        found.ok_or_else(|| body.to_string())
    })
    .await;
    assert_eq!(records["answer"], 403, "{records}");
    assert_eq!(records["who"], "user alice", "{records}");
    assert!(
        records["reason"].as_str().unwrap().contains("another site"),
        "{records}"
    );
    let (_, still) = get_json(addr, &format!("/api/v1/specs/{spec_a}"), &bob).await;
    assert_eq!(still["suspended"]["reason"], "alice pauses");

    // The history: her sign-in and her control, as she may see them (her own records).
    let (_, mine) = get_json(addr, "/api/v1/controls", &alice).await;
    let whats: Vec<&str> = mine["controls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["what"].as_str().unwrap())
        .collect();
    assert!(whats.contains(&"GET /auth/callback"), "{whats:?}");
    assert!(
        mine["controls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["who"] == "user alice"),
        "{mine}"
    );

    // Sign out: the session is over for this browser.
    browser.goto(&format!("http://{addr}/")).await;
    browser.wait_for_text("#who", &["alice"]).await;
    browser.click("#sign-out").await;
    browser
        .wait_for(
            "the browser away from the daemon's page",
            "return !location.href.startsWith(arguments[0]) || document.querySelector('#who') === null",
            vec![json!(format!("http://{addr}/"))],
        )
        .await;
    browser.goto(&format!("http://{addr}/api/v1/whoami")).await;
    let said = browser.page_text().await;
    assert!(said.contains("\"kind\":\"anonymous\""), "{said}");
    browser.close().await;

    // bob sees both and steers neither.
    let browser = Browser::start().await;
    sign_in(&browser, addr, "bob", "bob-pw").await;
    browser.wait_for_spec_rows(2).await;
    let answer = browser
        .eval_with(
            "return fetch(arguments[0], {method: 'POST', credentials: 'same-origin'}) \
             .then(async r => [r.status, (await r.json()).error])",
            vec![json!(format!("api/v1/specs/{spec_a}/resume"))],
        )
        .await;
    assert_eq!(answer[0], 403, "{answer}");
    assert!(
        answer[1]
            .as_str()
            .unwrap()
            .contains(&format!("bob may not patch ConfigMap in namespace {ns_a}")),
        "{answer}"
    );
    browser.close().await;

    // From a terminal: `driftless login` sends a browser to the provider and keeps the ID
    // token it gets back; the CLI's controls then act as that person.
    let kept = secrets.path().join("alice-id-token");
    let mut login = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args([
            "login",
            "--oidc-issuer",
            &issuer,
            "--oidc-client-secret-file",
            &secret_file.display().to_string(),
            "--token-file",
            &kept.display().to_string(),
        ])
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(login.stderr.take().unwrap()));
    let url = loop {
        let line = tokio::time::timeout(support::WAIT, lines.next_line())
            .await
            .expect("login prints the address")
            .unwrap()
            .expect("login prints the address before it ends");
        if let Some(url) = line.trim().strip_prefix("http") {
            break format!("http{url}");
        }
    };
    assert!(url.starts_with(&format!("{issuer}/")), "{url}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let browser = Browser::start().await;
    browser.goto(&url).await;
    browser.type_into("#username", "alice").await;
    browser.type_into("#password", "alice-pw").await;
    browser.click("#kc-login").await;
    browser
        .wait_for_text("body", &["Back to the terminal"])
        .await;
    browser.close().await;
    let mut said = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        said.push_str(&line);
        said.push('\n');
    }
    let status = login.wait().await.unwrap();
    assert!(status.success(), "login: {said}");
    assert!(said.contains("Signed in as alice"), "{said}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the kept token is its owner's alone");
    let server = format!("http://{addr}");
    let kept_flag = kept.display().to_string();
    let out = support::driftless(&[
        "resume",
        &spec_a,
        "--server",
        &server,
        "--token-file",
        &kept_flag,
    ]);
    assert!(out.status.success(), "{}", support::show(&out));
    let out = support::driftless(&["reconcile", "--server", &server, "--token-file", &kept_flag]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "alice may not patch ConfigMap in namespace {ns_b}"
        )),
        "{err}"
    );

    // RBAC changes reach the listener within the time answers are kept (10 s).
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns_b);
    bindings
        .delete("viewers", &DeleteParams::default())
        .await
        .unwrap();
    support::eventually("bob no longer sees B", Duration::from_secs(30), || async {
        let (_, seen) = get_json(addr, "/api/v1/status", &bob).await;
        let seen = ids(&seen);
        if seen == [spec_a.clone()] {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await;
    assert_eq!(
        claims_of(&alice)["preferred_username"],
        "alice",
        "the provider named the user"
    );
}
