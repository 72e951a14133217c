//! Running as a ServiceAccount of the local cluster (RBAC authorizer on): its token, and a
//! kubeconfig with it.

use std::path::Path;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{WAIT, admin_kubeconfig, eventually, read};

/// The token of a ServiceAccount: from a named `service-account-token` Secret the token
/// controller fills in, or else a TokenRequest's (no token Secret is made for an account
/// since Kubernetes 1.24).
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
            let Some(name) = secret else {
                let request: k8s_openapi::api::authentication::v1::TokenRequest =
                    serde_json::from_value(
                        json!({"spec": {"audiences": [], "expirationSeconds": 7200}}),
                    )
                    .map_err(|e| e.to_string())?;
                let made = accounts
                    .create_token_request(account, &Default::default(), &request)
                    .await
                    .map_err(|e| e.to_string())?;
                return made
                    .status
                    .and_then(|s| s.token)
                    .ok_or_else(|| "no token in the TokenRequest's status".to_string());
            };
            let s = secrets.get(name).await.map_err(|e| e.to_string())?;
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

/// A ClusterRole and its binding (named alike), deleted on drop, also when the test
/// fails: from a thread of its own, as the test's runtime may be gone.
pub struct ClusterRbac(String);

impl Drop for ClusterRbac {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.0);
        super::cleanup_on_own_thread(move |admin| async move {
            let dp = kube::api::DeleteParams::default();
            let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
                .delete(&name, &dp)
                .await;
            let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin)
                .delete(&name, &dp)
                .await;
        });
    }
}

/// ServiceAccount `replica` in `ns`, bound to ClusterRole `name` (made with
/// `cluster_rules`) and, in each of `role_namespaces`, to the Role `replica` there (the
/// test writes those); a kubeconfig for it at `kubeconfig`.
pub async fn replica_account_with(
    admin: &Client,
    ns: &str,
    name: &str,
    cluster_rules: Value,
    role_namespaces: &[&str],
    kubeconfig: &Path,
) -> ClusterRbac {
    let cleanup = ClusterRbac(name.to_string());
    let subject = json!([{"kind": "ServiceAccount", "name": "replica", "namespace": ns}]);
    let mut manifests = vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "replica", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": cluster_rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": subject}),
    ];
    for namespace in role_namespaces {
        manifests.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "replica", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "replica"},
               "subjects": subject}));
    }
    for doc in &manifests {
        super::apply_manifest(admin, doc).await;
    }
    token_kubeconfig(&account_token(admin, ns, "replica", None).await, kubeconfig);
    cleanup
}
