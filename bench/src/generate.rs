//! The benchmark's spec trees: N specs, deterministic, one file per spec, spread over a
//! set of namespaces of their own.
//!
//! The mix, by `i % 20`: 8 in 20 `elasticweb` (Deployment + Service; one in 16 of them at
//! 1 replica, the rest at 0, so the cluster is not flooded with Pods), 4 in 20
//! `workspace` (with storage; one in 4 running: PVC + Pod + Service, the rest stopped:
//! PVC + Service), 8 in 20 `localservice` (one Service per node). With the testbed's 3
//! nodes that is 2.45 objects per spec: 2,450 objects for N = 1,000.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What spec `i` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecKind {
    ElasticWeb { replicas: u64 },
    Workspace { running: bool },
    LocalService,
}

pub const SINGLE_POD_QPS: u64 = 800;
pub const IMAGE: &str = "nginx:1.17.1";
/// The image of a changed spec (the 1 %-changed set).
pub const IMAGE_CHANGED: &str = "nginx:1.17.2";

pub fn kind_of(i: usize) -> SpecKind {
    match i % 20 {
        0 => SpecKind::ElasticWeb {
            replicas: u64::from((i / 20).is_multiple_of(2)),
        },
        1..=7 => SpecKind::ElasticWeb { replicas: 0 },
        8 => SpecKind::Workspace { running: true },
        9..=11 => SpecKind::Workspace { running: false },
        _ => SpecKind::LocalService,
    }
}

/// Objects spec `i` renders to with `nodes` nodes.
pub fn objects_of(i: usize, nodes: usize) -> usize {
    match kind_of(i) {
        SpecKind::ElasticWeb { .. } => 2,
        SpecKind::Workspace { running: true } => 3,
        SpecKind::Workspace { running: false } => 2,
        SpecKind::LocalService => nodes,
    }
}

pub fn expected_objects(n: usize, nodes: usize) -> usize {
    (0..n).map(|i| objects_of(i, nodes)).sum()
}

/// Pods the tree asks for (running workspaces and elasticweb replicas).
pub fn expected_pods(n: usize) -> u64 {
    (0..n)
        .map(|i| match kind_of(i) {
            SpecKind::ElasticWeb { replicas } => replicas,
            SpecKind::Workspace { running } => u64::from(running),
            SpecKind::LocalService => 0,
        })
        .sum()
}

/// Changes to the generated tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edits {
    /// Specs (elasticweb) whose image is `IMAGE_CHANGED`.
    pub image: BTreeSet<usize>,
    /// Specs (elasticweb) scaled to `total-qps` = one more Pod's worth.
    pub scaled_up: BTreeSet<usize>,
}

/// One tree: `n` specs in namespaces `<prefix>-0` .. `<prefix>-<namespaces - 1>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub n: usize,
    pub namespaces: usize,
    pub prefix: String,
}

impl Tree {
    pub fn new(n: usize, namespaces: usize, prefix: &str) -> Tree {
        Tree {
            n,
            namespaces: namespaces.max(1),
            prefix: prefix.to_string(),
        }
    }

    pub fn namespace(&self, i: usize) -> String {
        format!("{}-{}", self.prefix, i % self.namespaces)
    }

    pub fn namespace_names(&self) -> Vec<String> {
        (0..self.namespaces.min(self.n.max(1)))
            .map(|k| format!("{}-{k}", self.prefix))
            .collect()
    }

    pub fn name(&self, i: usize) -> String {
        match kind_of(i) {
            SpecKind::ElasticWeb { .. } => format!("web-{i:05}"),
            SpecKind::Workspace { .. } => format!("ide-{i:05}"),
            SpecKind::LocalService => format!("local-{i:05}"),
        }
    }

    /// `kind/namespace/name`, as driftless names the spec.
    pub fn spec_id(&self, i: usize) -> String {
        let kind = match kind_of(i) {
            SpecKind::ElasticWeb { .. } => "elasticweb",
            SpecKind::Workspace { .. } => "workspace",
            SpecKind::LocalService => "localservice",
        };
        format!("{kind}/{}/{}", self.namespace(i), self.name(i))
    }

    /// The file of spec `i`, relative to the tree's root.
    pub fn file(&self, i: usize) -> PathBuf {
        PathBuf::from(format!("{:02}", i % self.namespaces)).join(format!("{}.toml", self.name(i)))
    }

    pub fn text(&self, i: usize, edits: &Edits) -> String {
        let ns = self.namespace(i);
        let name = self.name(i);
        match kind_of(i) {
            SpecKind::ElasticWeb { replicas } => {
                let image = if edits.image.contains(&i) {
                    IMAGE_CHANGED
                } else {
                    IMAGE
                };
                let replicas = replicas + u64::from(edits.scaled_up.contains(&i));
                format!(
                    "namespace = \"{ns}\"\n\n[elasticweb.{name}]\nimage = \"{image}\"\n\
                     single-pod-qps = {SINGLE_POD_QPS}\ntotal-qps = {}\ncpu = \"10m\"\nmemory = \"16Mi\"\n",
                    replicas * SINGLE_POD_QPS
                )
            }
            SpecKind::Workspace { running } => {
                let state = if running { "running" } else { "stopped" };
                format!(
                    "namespace = \"{ns}\"\n\n[workspace.{name}]\nimage = \"codercom/code-server:4.0.0\"\n\
                     cpu = \"100m\"\nmemory = \"128Mi\"\nstorage = \"1Gi\"\nstate = \"{state}\"\n"
                )
            }
            SpecKind::LocalService => format!(
                "namespace = \"{ns}\"\n\n[localservice.{name}]\nselector = {{ app = \"{name}\" }}\n\
                 ports = [{{ name = \"http\", port = 8080, target-port = 8080 }}]\n"
            ),
        }
    }

    /// Writes the whole tree under `root` (which should be empty or hold this tree).
    pub fn write(&self, root: &Path, edits: &Edits) -> std::io::Result<()> {
        for i in 0..self.n {
            self.write_one(root, i, edits)?;
        }
        Ok(())
    }

    /// Rewrites spec `i`'s file: what an edit in the daemon benchmark does.
    pub fn write_one(&self, root: &Path, i: usize, edits: &Edits) -> std::io::Result<()> {
        let path = root.join(self.file(i));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.text(i, edits))
    }
}

/// The 1 %-changed set: every 100th spec (an elasticweb), its image bumped.
pub fn one_percent(n: usize) -> Edits {
    Edits {
        image: (0..n).step_by(100).collect(),
        scaled_up: BTreeSet::new(),
    }
}

/// `k` elasticweb specs at 0 replicas, spread evenly over the tree: the daemon
/// benchmark scales each to 1 in turn.
pub fn edit_targets(n: usize, k: usize) -> Vec<usize> {
    let candidates: Vec<usize> = (0..n)
        .filter(|&i| kind_of(i) == SpecKind::ElasticWeb { replicas: 0 })
        .collect();
    if k == 0 || candidates.is_empty() {
        return Vec::new();
    }
    let k = k.min(candidates.len());
    (0..k)
        .map(|j| candidates[j * candidates.len() / k])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftless::render::{Facts, NodeFacts, render};

    fn nodes(k: usize) -> Vec<NodeFacts> {
        (1..=k)
            .map(|i| NodeFacts {
                name: format!("node-{i}"),
                labels: Default::default(),
            })
            .collect()
    }

    #[test]
    fn the_mix_is_about_two_and_a_half_objects_per_spec() {
        assert_eq!(expected_objects(1000, 3), 2450);
        assert_eq!(expected_pods(1000), 25 + 50);
        let kinds: Vec<SpecKind> = (0..1000).map(kind_of).collect();
        let count = |f: fn(&SpecKind) -> bool| kinds.iter().filter(|k| f(k)).count();
        assert_eq!(count(|k| matches!(k, SpecKind::ElasticWeb { .. })), 400);
        assert_eq!(count(|k| matches!(k, SpecKind::Workspace { .. })), 200);
        assert_eq!(count(|k| matches!(k, SpecKind::LocalService)), 400);
    }

    #[test]
    fn generated_trees_are_valid_and_render_as_counted() {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::new(200, 10, "bench-t0");
        let edits = Edits {
            image: one_percent(200).image,
            scaled_up: edit_targets(200, 3).into_iter().collect(),
        };
        tree.write(dir.path(), &edits).unwrap();
        let specs = driftless::spec::load_dir(dir.path()).unwrap();
        assert_eq!(specs.specs.len(), 200);
        let ids: BTreeSet<String> = specs.specs.iter().map(|s| s.id.to_string()).collect();
        assert!((0..200).all(|i| ids.contains(&tree.spec_id(i))));
        let facts = Facts {
            instance: "bench".into(),
            nodes: nodes(3),
        };
        let objects = render(&specs, &facts).unwrap();
        assert_eq!(objects.len(), expected_objects(200, 3));
        let namespaces: BTreeSet<&str> = objects
            .iter()
            .filter_map(|o| o.namespace.as_deref())
            .collect();
        assert_eq!(
            namespaces,
            tree.namespace_names()
                .iter()
                .map(String::as_str)
                .collect::<BTreeSet<_>>()
        );
        // The edits show in the rendered objects.
        let deployment = |i: usize| {
            objects
                .iter()
                .find(|o| o.kind == "Deployment" && o.name == tree.name(i))
                .unwrap()
        };
        assert_eq!(
            deployment(100).body.value()["spec"]["template"]["spec"]["containers"][0]["image"],
            IMAGE_CHANGED
        );
        assert_eq!(
            deployment(1).body.value()["spec"]["template"]["spec"]["containers"][0]["image"],
            IMAGE
        );
        for i in edit_targets(200, 3) {
            assert_eq!(deployment(i).body.value()["spec"]["replicas"], 1, "{i}");
        }
    }

    #[test]
    fn edit_targets_are_distinct_idle_elasticwebs() {
        let t = edit_targets(1000, 30);
        assert_eq!(t.len(), 30);
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert!(
            t.iter()
                .all(|&i| kind_of(i) == SpecKind::ElasticWeb { replicas: 0 })
        );
        assert_eq!(edit_targets(10, 100).len(), 7, "capped at the candidates");
        assert!(edit_targets(1000, 0).is_empty());
        assert!(
            one_percent(1000)
                .image
                .iter()
                .all(|&i| matches!(kind_of(i), SpecKind::ElasticWeb { .. }))
        );
        assert_eq!(one_percent(1000).image.len(), 10);
    }
}
