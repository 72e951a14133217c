//! The readiness gate between a sync's stages (`apply::stages`), shared by the daemon
//! and `driftless apply`: polls the stage's objects until each is ready (kstatus), one
//! has failed, or the time given runs out.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::apply::{Engine, Gate, Readiness};
use crate::health::{Status, kstatus};
use crate::object::Packed;
use crate::render::Object;

pub struct Poll<'a> {
    pub engine: &'a Engine,
    /// How long one stage may take to be ready.
    pub timeout: Duration,
}

impl Gate for Poll<'_> {
    async fn ready(&self, objects: &[Object]) -> Readiness {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let late = tokio::time::Instant::now() >= deadline;
            let waiting = match self.engine.observe(objects).await {
                Ok(observed) => {
                    let now = Timestamp::now();
                    let mut waiting = None;
                    for o in objects {
                        let live = observed.objects.get(&o.key()).map(Packed::value);
                        let status =
                            kstatus::compute_with(live.as_ref(), now, o.policy.health.as_deref());
                        let said = match &status.reason {
                            Some(r) => format!("{} [{r}]: {}", o.display_ref(), status.message),
                            None => format!("{}: {}", o.display_ref(), status.message),
                        };
                        match status.status {
                            Status::Current => {}
                            Status::Failed => return Readiness::Failed(said),
                            _ => {
                                waiting.get_or_insert(said);
                            }
                        }
                    }
                    waiting
                }
                Err(e) => Some(format!("reading its objects: {e}")),
            };
            match waiting {
                None => return Readiness::Ready,
                Some(said) if late => {
                    return Readiness::NotReady(format!(
                        "not ready within {}: {said}",
                        humantime::format_duration(self.timeout)
                    ));
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}
