//! One cluster as the daemon holds it: a handle passed as a value to everything that
//! talks to that cluster (the sync, readiness, the watches, the API's reads and
//! controls, the shard member, the render's facts). The engine inside it owns what is
//! that cluster's alone: its client, discovery, the server's version, the writes
//! counted, the inventory's store and the buckets held. A second cluster is a second
//! handle; nothing in the daemon reaches a cluster any other way.
//!
//! Its live objects are the pure state's `LiveStore`, filled by the watches this handle
//! starts: a value of the state machine, not of the handle, so the loop never locks it.

use std::ops::Deref;
use std::sync::Arc;

use kube::Client;

use super::{Engine, Options};

/// A cluster's handle: cheap to clone, shared by the tasks that talk to it.
#[derive(Clone)]
pub struct Cluster {
    engine: Arc<Engine>,
}

impl Cluster {
    pub fn new(client: Client, opts: Options) -> Cluster {
        Cluster {
            engine: Arc::new(Engine::new(client, opts)),
        }
    }

    pub fn client(&self) -> &Client {
        &self.engine.client
    }

    /// The engine, for a task that outlives the borrow (a sync, the object view).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The instance this daemon writes as on the cluster.
    pub fn instance(&self) -> &str {
        &self.engine.opts.instance
    }

    /// What charts are told of the cluster: its version and the API versions it serves.
    pub async fn chart_facts(&self) -> Result<crate::hydrate::helm::ClusterFacts, kube::Error> {
        crate::cluster::chart_facts(self.client()).await
    }
}

impl Deref for Cluster {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.engine
    }
}
