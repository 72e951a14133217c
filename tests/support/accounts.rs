//! Running as a ServiceAccount of the local cluster (RBAC authorizer on): its token, and a
//! kubeconfig with it.

use std::path::Path;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{WAIT, admin_kubeconfig, eventually, read};

/// The token of a ServiceAccount, from the Secret the token controller fills in: either
/// the one it creates for the account, or a named `service-account-token` Secret.
pub async fn account_token(
    admin: &Client,
    ns: &str,
    account: &str,
    secret: Option<&str>,
) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    eventually(
        &format!("a token for ServiceAccount {ns}/{account}"),
        WAIT,
        || async {
            let name = match secret {
                Some(s) => s.to_string(),
                None => accounts
                    .get(account)
                    .await
                    .map_err(|e| e.to_string())?
                    .secrets
                    .unwrap_or_default()
                    .into_iter()
                    .find_map(|r| r.name)
                    .ok_or("no token Secret yet")?,
            };
            let s = secrets.get(&name).await.map_err(|e| e.to_string())?;
            let data = s.data.unwrap_or_default();
            let token = data.get("token").ok_or("token not filled in yet")?;
            String::from_utf8(token.0.clone()).map_err(|e| e.to_string())
        },
    )
    .await
}

/// A kubeconfig at `path` with the admin kubeconfig's server and CA, and `token` as the
/// user.
pub fn token_kubeconfig(token: &str, path: &Path) {
    let admin: Value = serde_saphyr::from_str(&read(&admin_kubeconfig())).unwrap();
    let cluster = &admin["clusters"][0]["cluster"];
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
        "current-context": "sa",
    });
    std::fs::write(path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}
