//! What a whole sync takes from the state instead of rendering it again: the tree's
//! render, kept until the tree or the nodes change. (What it takes instead of listing
//! is the live store's: `apply::LiveStore::known`.)

use std::sync::Arc;

use super::State;
use crate::render::Object;

impl State {
    /// The whole tree's objects, if rendered since the tree or the nodes last changed.
    /// A stale render is dropped here, before the next is made: two at once would be a
    /// new revision's peak.
    pub fn rendered(&mut self) -> Option<Arc<[Object]>> {
        match &self.rendered {
            Some((epoch, objects)) if *epoch == self.render_epoch => Some(objects.clone()),
            _ => {
                self.rendered = None;
                None
            }
        }
    }

    /// The whole tree's objects as rendered now, for the syncs until it or the nodes
    /// change. Not before every watched kind is listed: a restart's sync and the
    /// watches' first lists after it are the daemon's peak, and holding the render
    /// through them raised it by 23 MiB at 10,000 specs (the next resync keeps it).
    pub(crate) fn keep_rendered(&mut self, objects: Arc<[Object]>) {
        if self.live.watches_listed() {
            self.rendered = Some((self.render_epoch, objects));
        }
    }

    /// Readiness is judged once a restart's first sync has ended: before, with its kinds
    /// half listed, every spec would be judged again each second on the loop the lists'
    /// events wait for (a fifth of a core at 10,000 specs); once they are in, a
    /// judgement (0.6 s and 20 MiB) came before or beside the sync the status waits for
    /// too, and made the restart's peak.
    pub(crate) fn judging_held(&self) -> bool {
        self.live.first_lists()
    }
}
