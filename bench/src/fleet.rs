//! The fleet workload (`--fleet K,N`, issue 73): K clusters of N specs each from one tree,
//! served as a fleet is served today (docs "Fleets"): one daemon per cluster, every one
//! following the same directory. The clusters are the local cluster (the home cluster)
//! and K-1 kube-apiservers of its version on its etcd, each under a key prefix of its own
//! (`--etcd-prefix`, no controllers): K control planes on the machine's cores beside the
//! K daemons. The tree: N ConfigMaps under `all/`, sent to every cluster by a label rule,
//! each with its cluster's `${cluster.name}`.
//!
//! - the first sync: every daemon started at once, until each has converged: the
//!   fleet's time (the last cluster's), each cluster's, each daemon's CPU and peak memory;
//! - a no-op resync of each daemon through its API, one after the other: their median;
//! - one changed file with every cluster up: the time until every cluster has it;
//! - one cluster's outage: its apiserver stopped, another file changed: the time until
//!   every other cluster has the change (against the same with every cluster up), and
//!   until the stopped one's daemon says its specs `Unknown`; then it is started again:
//!   the time until it has the change.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::measure::{free_port, machine, proc_status_kib, process_cpu_s, spawn_daemon};
use crate::scale::{Setup, TOKEN, is_alive, is_converged, median, mib, setup, sync_now_at};
use crate::{Args, baseline};

/// Past this, a phase is reported as failed, not waited for.
const HANG: Duration = Duration::from_secs(1800);
const NAMESPACE: &str = "bench-fleet";

#[derive(Debug, Serialize, Deserialize, Clone, Default)]
pub struct FleetResults {
    pub date: String,
    pub commit: String,
    pub machine: Value,
    pub apiserver_version: String,
    pub clusters: usize,
    pub specs_per_cluster: usize,
    /// One daemon served every cluster (`--one-daemon`), not one each.
    #[serde(default)]
    pub one_daemon: bool,
    /// Until the last cluster converged.
    pub first_sync_s: f64,
    /// Each cluster's first sync, by its name.
    pub first_sync_by_cluster_s: Vec<(String, f64)>,
    /// Each daemon's CPU over the first sync.
    pub first_daemon_cpu_s: Vec<f64>,
    /// Each daemon's VmHWM once it converged.
    pub first_peak_rss_mib: Vec<f64>,
    /// The apiservers' own CPU over the first sync (the extra ones; the home cluster's
    /// control plane is not counted).
    pub first_extra_apiservers_cpu_s: f64,
    /// Each daemon's no-op resync, one daemon at a time.
    pub noop_runs_s: Vec<f64>,
    pub noop_s: f64,
    /// One file changed, every cluster up: until every cluster has it.
    pub change_all_up_s: f64,
    /// One file changed, one cluster's apiserver stopped: until every other cluster has it.
    pub change_one_away_s: f64,
    /// Until the stopped cluster's daemon said its specs `Unknown`.
    pub away_told_s: f64,
    /// From its apiserver's start again until it has the change.
    pub back_converged_s: f64,
    /// Each daemon's VmRSS at the end.
    pub steady_rss_mib: Vec<f64>,
}

/// One extra cluster: its apiserver and how to reach it.
struct Apiserver {
    child: Option<std::process::Child>,
    args: Vec<String>,
    dir: PathBuf,
    port: u16,
    client: Client,
}

/// A cluster's daemon, or its engine inside the fleet's one daemon.
struct Daemon {
    name: String,
    /// None for the second and later clusters of one daemon.
    child: Option<tokio::process::Child>,
    pid: u32,
    port: u16,
    status: PathBuf,
    /// Where its API is on the listener (`/clusters/NAME` in one daemon).
    prefix: String,
}

pub async fn run(
    args: &Args,
    driftless: &Path,
    k: usize,
    n: usize,
) -> anyhow::Result<FleetResults> {
    anyhow::ensure!(k >= 2, "--fleet K,N: a fleet is two clusters or more");
    let Setup {
        client: home,
        apiserver_version,
        work,
        token,
    } = setup(args, "fleet").await?;

    eprintln!(
        "fleet: booting {} apiservers beside the local cluster",
        k - 1
    );
    let mut extra = Vec::new();
    for i in 1..k {
        extra.push(Apiserver::boot(&work.join(format!("c{i:02}"))).await?);
    }
    let mut clients = vec![("in-cluster".to_string(), home.clone())];
    let mut clusters_toml = "[cluster.in-cluster]\nlabels = { fleet = \"yes\" }\n".to_string();
    for (i, a) in extra.iter().enumerate() {
        let name = format!("c{:02}", i + 1);
        clusters_toml.push_str(&format!(
            "\n[cluster.{name}]\nkubeconfig = \"{}\"\nlabels = {{ fleet = \"yes\" }}\n",
            a.dir.join("kubeconfig").display()
        ));
        clients.push((name, a.client.clone()));
    }
    let clusters = work.join("clusters.toml");
    std::fs::write(&clusters, clusters_toml)?;
    for (name, client) in &clients {
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
        match Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                bail!(
                    "namespace {NAMESPACE} exists on {name}: delete it first (the first sync must be cold)"
                )
            }
            Err(e) => return Err(e).context(format!("creating the namespace on {name}")),
        }
    }
    let tree = work.join("tree");
    write_tree(&tree, n)?;

    let one = args.one_daemon;
    match one {
        true => eprintln!("fleet: one daemon, {k} clusters of {n} specs: first sync"),
        false => eprintln!("fleet: {k} daemons, {n} specs each: first sync"),
    }
    let apiservers_cpu = || {
        extra
            .iter()
            .filter_map(|a| a.child.as_ref().and_then(|c| process_cpu_s(c.id())))
            .sum::<f64>()
    };
    let cpu_before = apiservers_cpu();
    let start = Instant::now();
    let mut daemons = Vec::new();
    match one {
        true => {
            let names: Vec<&str> = clients.iter().map(|(n, _)| n.as_str()).collect();
            daemons = start_fleet_daemon(driftless, &work, &tree, &clusters, &token, &names)?;
        }
        false => {
            for (name, _) in &clients {
                daemons.push(start_daemon(
                    driftless,
                    &work,
                    &tree,
                    &clusters,
                    &token,
                    Some(name),
                )?);
            }
        }
    }
    let mut results = FleetResults {
        date: Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string(),
        commit: baseline::this_commit(),
        machine: serde_json::to_value(machine())?,
        apiserver_version,
        clusters: k,
        specs_per_cluster: n,
        one_daemon: one,
        ..FleetResults::default()
    };
    let mut pending: Vec<usize> = (0..daemons.len()).collect();
    while !pending.is_empty() {
        if start.elapsed() > HANG {
            bail!("not converged after {HANG:?}: {pending:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        pending.retain(|&i| {
            let d = &daemons[i];
            match read_status(&d.status) {
                Some(s) if is_converged(&s, n) => {
                    results
                        .first_sync_by_cluster_s
                        .push((d.name.clone(), start.elapsed().as_secs_f64()));
                    false
                }
                _ => true,
            }
        });
        for d in &daemons {
            anyhow::ensure!(
                is_alive(d.pid),
                "daemon {} exited; its log is in {}",
                d.name,
                work.display()
            );
        }
    }
    results.first_sync_s = start.elapsed().as_secs_f64();
    results.first_extra_apiservers_cpu_s = apiservers_cpu() - cpu_before;
    for d in daemons.iter().filter(|d| d.child.is_some()) {
        results
            .first_daemon_cpu_s
            .push(process_cpu_s(d.pid).unwrap_or(f64::NAN));
        results
            .first_peak_rss_mib
            .push(mib(proc_status_kib(d.pid, "VmHWM:")));
    }
    eprintln!("fleet: first sync {:.1}s", results.first_sync_s);

    eprintln!("fleet: a no-op resync of each daemon");
    for d in &daemons {
        let t = Instant::now();
        sync_now_at(d.port, &d.prefix)
            .await
            .with_context(|| format!("the no-op resync of {}", d.name))?;
        results.noop_runs_s.push(t.elapsed().as_secs_f64());
    }
    results.noop_s = median(&results.noop_runs_s);

    eprintln!("fleet: one file changed, every cluster up");
    write_spec(&tree, 0, "two")?;
    let t = Instant::now();
    until_all_have(&clients, "c00000", "two", t).await?;
    results.change_all_up_s = t.elapsed().as_secs_f64();

    eprintln!("fleet: one cluster away, one file changed");
    let away = extra
        .last_mut()
        .ok_or_else(|| anyhow!("no extra cluster"))?;
    away.stop();
    let away_daemon = daemons.last().ok_or_else(|| anyhow!("no daemon"))?;
    write_spec(&tree, 1, "two")?;
    let t = Instant::now();
    until_all_have(&clients[..clients.len() - 1], "c00001", "two", t).await?;
    results.change_one_away_s = t.elapsed().as_secs_f64();
    loop {
        let told = read_status(&away_daemon.status).is_some_and(|s| {
            s["specs"]
                .as_array()
                .is_some_and(|specs| specs.iter().all(|s| s["status"] == "Unknown"))
        });
        if told {
            break;
        }
        anyhow::ensure!(
            t.elapsed() < HANG,
            "the stopped cluster's daemon never said Unknown"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    results.away_told_s = t.elapsed().as_secs_f64();
    let away = extra
        .last_mut()
        .ok_or_else(|| anyhow!("no extra cluster"))?;
    away.start_again().await?;
    let t = Instant::now();
    until_all_have(&clients[clients.len() - 1..], "c00001", "two", t).await?;
    results.back_converged_s = t.elapsed().as_secs_f64();
    for d in daemons.iter().filter(|d| d.child.is_some()) {
        results
            .steady_rss_mib
            .push(mib(proc_status_kib(d.pid, "VmRSS:")));
    }
    for d in daemons {
        if let Some(mut child) = d.child {
            let _ = child.kill().await;
        }
    }
    let _ = Api::<Namespace>::all(home)
        .delete(NAMESPACE, &Default::default())
        .await;
    for a in &mut extra {
        a.stop();
    }
    Ok(results)
}

fn read_status(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Until each of `clients` has ConfigMap `name` with `v` = `value`.
async fn until_all_have(
    clients: &[(String, Client)],
    name: &str,
    value: &str,
    since: Instant,
) -> anyhow::Result<()> {
    for (cluster, client) in clients {
        let api = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
        loop {
            let seen = api.get_opt(name).await.ok().flatten();
            if seen
                .and_then(|c| c.data)
                .is_some_and(|d| d.get("v").map(String::as_str) == Some(value))
            {
                break;
            }
            anyhow::ensure!(
                since.elapsed() < HANG,
                "{cluster} never had {name} = {value}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// `.driftless.toml` sending `all/` to every cluster, and N ConfigMaps there.
fn write_tree(dir: &Path, n: usize) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir.join("all"))?;
    std::fs::write(
        dir.join(".driftless.toml"),
        "[vars]\n\n[[cluster]]\npath = \"all/**\"\nlabels = { fleet = \"yes\" }\n",
    )?;
    for i in 0..n {
        write_spec(dir, i, "one")?;
    }
    Ok(())
}

fn write_spec(dir: &Path, i: usize, value: &str) -> anyhow::Result<()> {
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i:05}\n  namespace: {NAMESPACE}\ndata:\n  v: \"{value}\"\n  cluster: \"${{cluster.name}}\"\n"
    );
    // Written beside it and renamed: a daemon never reads half a file.
    let path = dir.join(format!("all/c{i:05}.yaml"));
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

fn start_daemon(
    driftless: &Path,
    work: &Path,
    tree: &Path,
    clusters: &Path,
    token: &Path,
    cluster: Option<&str>,
) -> anyhow::Result<Daemon> {
    let port = free_port()?;
    let name = cluster.unwrap_or("fleet");
    let status = work.join(format!("status-{name}.json"));
    let _ = std::fs::remove_file(&status);
    let log = std::fs::File::create(work.join(format!("daemon-{name}.log")))?;
    let (child, pid) = spawn_daemon(
        tokio::process::Command::new(driftless)
            .args(["--instance", "fleet", "run", "--dir"])
            .arg(tree)
            .arg("--clusters")
            .arg(clusters)
            .args(cluster.map(|c| ["--cluster", c]).into_iter().flatten())
            .args(["--resync", "2s", "--status-file"])
            .arg(&status)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--api-token-file")
            .arg(token)
            .arg("--cache-dir")
            .arg(work.join(format!("cache-{name}"))),
        log,
    )?;
    Ok(Daemon {
        name: name.to_string(),
        child: Some(child),
        pid,
        port,
        status,
        prefix: String::new(),
    })
}

/// One daemon serving every cluster of `names`: a view of it per cluster (its status
/// file beside the fleet's, its API under `/clusters/NAME`).
fn start_fleet_daemon(
    driftless: &Path,
    work: &Path,
    tree: &Path,
    clusters: &Path,
    token: &Path,
    names: &[&str],
) -> anyhow::Result<Vec<Daemon>> {
    let whole = start_daemon(driftless, work, tree, clusters, token, None)?;
    let mut views = Vec::new();
    for name in names {
        let _ = std::fs::remove_file(work.join(format!("status-fleet.{name}.json")));
        views.push(Daemon {
            name: name.to_string(),
            child: None,
            pid: whole.pid,
            port: whole.port,
            status: work.join(format!("status-fleet.{name}.json")),
            prefix: format!("/clusters/{name}"),
        });
    }
    if let Some(first) = views.first_mut() {
        first.child = whole.child;
    }
    Ok(views)
}

impl Apiserver {
    /// An apiserver with the local cluster's flags (`$DRIFTLESS_TESTBED_DIR/cmds`), its
    /// own port, certificates, admin token and etcd key prefix.
    async fn boot(dir: &Path) -> anyhow::Result<Apiserver> {
        let testbed = std::env::var("DRIFTLESS_TESTBED_DIR")
            .context("DRIFTLESS_TESTBED_DIR: scripts/bench boots the cluster")?;
        let first = std::fs::read_to_string(Path::new(&testbed).join("cmds/kube-apiserver"))
            .context("the local apiserver's command line")?;
        std::fs::create_dir_all(dir)?;
        let tokens = dir.join("tokens.csv");
        std::fs::write(&tokens, format!("{TOKEN},admin,admin,\"system:masters\"\n"))?;
        let port = free_port()?;
        let certs = dir.join("certs");
        let own = [
            ("--secure-port", port.to_string()),
            ("--cert-dir", certs.display().to_string()),
            ("--token-auth-file", tokens.display().to_string()),
        ];
        let mut args = Vec::new();
        let words: Vec<String> = first
            .split_whitespace()
            .map(|w| w.replace('\\', ""))
            .collect();
        let mut it = words.into_iter();
        while let Some(a) = it.next() {
            match own.iter().find(|(flag, _)| a == *flag) {
                Some((flag, value)) => {
                    it.next();
                    args.push(format!("{flag}={value}"));
                }
                None => args.push(a),
            }
        }
        args.push(format!(
            "--etcd-prefix=/driftless-bench-fleet-{}",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("x")
        ));
        let mut server = Apiserver {
            child: None,
            args,
            dir: dir.to_path_buf(),
            port,
            client: Client::try_default().await?,
        };
        server.start_again().await?;
        Ok(server)
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it (again) and waits until it serves its namespaces; writes its kubeconfig.
    async fn start_again(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("kube-apiserver.log"))?;
        let mut cmd = std::process::Command::new(&self.args[0]);
        cmd.args(&self.args[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for var in [
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
            "no_proxy",
            "NO_PROXY",
        ] {
            cmd.env_remove(var);
        }
        self.child = Some(cmd.spawn().context("starting kube-apiserver")?);
        let start = Instant::now();
        loop {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(300),
                "the apiserver in {} did not come up",
                self.dir.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
            let ca = self.dir.join("certs/apiserver.crt");
            if !ca.is_file() {
                continue;
            }
            let kubeconfig = self.dir.join("kubeconfig");
            write_kubeconfig(&kubeconfig, self.port, &ca)?;
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig)?,
                &Default::default(),
            )
            .await?;
            let client = Client::try_from(config)?;
            if Api::<Namespace>::all(client.clone())
                .get("default")
                .await
                .is_ok()
            {
                self.client = client;
                return Ok(());
            }
        }
    }
}

fn write_kubeconfig(path: &Path, port: u16, ca: &Path) -> anyhow::Result<()> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority": ca,
        }}],
        "users": [{"name": "admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "admin"}}],
        "current-context": "c",
    });
    std::fs::write(path, serde_json::to_string_pretty(&config)?)?;
    Ok(())
}

pub fn markdown(r: &FleetResults) -> String {
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
    let specs = (r.clusters * r.specs_per_cluster).max(1) as f64;
    let mut sorted: Vec<f64> = r.first_sync_by_cluster_s.iter().map(|(_, s)| *s).collect();
    sorted.sort_by(f64::total_cmp);
    // One daemon: its share per cluster; a daemon each: the median daemon.
    let per_cluster = |v: &[f64]| match r.one_daemon {
        true => sum(v) / r.clusters.max(1) as f64,
        false => median(v),
    };
    let how = match r.one_daemon {
        true => "one daemon",
        false => "a daemon per cluster",
    };
    format!(
        "## Fleet: {k} clusters x {n} specs, {how} ({date}, {version})\n\n\
         | figure | value |\n|---|---|\n\
         | first sync, the whole fleet (the last cluster) | {first:.1} s |\n\
         | first sync per cluster: first, median, last | {f0:.1} s, {fm:.1} s, {fl:.1} s |\n\
         | daemons' CPU over the first sync: all, per cluster (median, or one daemon's share), per spec | {cpu:.1} CPU-s, {cpuc:.2} CPU-s, {cpus:.2} ms |\n\
         | the extra apiservers' CPU over the first sync | {api:.1} CPU-s |\n\
         | daemons' peak RSS: all, per cluster (median, or one daemon's share; max), per spec | {rss:.0} MiB, {rssm:.1} / {rssx:.1} MiB, {rsss:.1} KiB |\n\
         | no-op resync per daemon (median) | {noop:.2} s |\n\
         | one file changed, every cluster up: until all have it | {up:.2} s |\n\
         | one file changed, one cluster stopped: until the others have it | {away:.2} s |\n\
         | the stopped cluster's daemon says its specs Unknown | {told:.1} s |\n\
         | the stopped cluster back: until it has the change | {back:.1} s |\n\
         | daemons' RSS at the end: all | {steady:.0} MiB |\n",
        k = r.clusters,
        n = r.specs_per_cluster,
        date = r.date,
        version = r.apiserver_version,
        first = r.first_sync_s,
        f0 = sorted.first().copied().unwrap_or(f64::NAN),
        fm = median(&sorted),
        fl = sorted.last().copied().unwrap_or(f64::NAN),
        cpu = sum(&r.first_daemon_cpu_s),
        cpuc = per_cluster(&r.first_daemon_cpu_s),
        cpus = sum(&r.first_daemon_cpu_s) / specs * 1000.0,
        api = r.first_extra_apiservers_cpu_s,
        rss = sum(&r.first_peak_rss_mib),
        rssm = per_cluster(&r.first_peak_rss_mib),
        rssx = max(&r.first_peak_rss_mib),
        rsss = sum(&r.first_peak_rss_mib) * 1024.0 / specs,
        noop = r.noop_s,
        up = r.change_all_up_s,
        away = r.change_one_away_s,
        told = r.away_told_s,
        back = r.back_converged_s,
        steady = sum(&r.steady_rss_mib),
    )
}
