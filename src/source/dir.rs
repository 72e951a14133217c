//! The directory source: a spec tree on disk, watched.
//!
//! The directory itself is watched (recursively), not its files: editors replace files
//! by rename, and a ConfigMap mount swaps a `..data` symlink, neither of which a watch
//! on the old file would see. Events are debounced; a periodic full rescan (the caller's
//! resync) covers anything a watch misses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::mpsc;

use crate::spec::SourceFile;

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("watching {path}: {source}")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
}

/// Keeps the watch alive; dropping it stops the events.
pub struct DirWatch {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

/// Watches `root`; every debounced batch of changes sends one `()`.
pub fn watch(root: &Path, debounce: Duration) -> Result<(DirWatch, mpsc::Receiver<()>), DirError> {
    let (tx, rx) = mpsc::channel(1);
    let mut debouncer = new_debouncer(debounce, None, move |res: DebounceEventResult| {
        match res {
            // A full channel means a reload is already pending: nothing is lost.
            Ok(events) if events.iter().any(|e| changes_tree(&e.event.kind)) => {
                let _ = tx.try_send(());
            }
            Ok(_) => {}
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "directory watch error");
                }
                let _ = tx.try_send(());
            }
        }
    })
    .map_err(|source| DirError::Watch {
        path: root.to_path_buf(),
        source,
    })?;
    debouncer
        .watch(root, RecursiveMode::Recursive)
        .map_err(|source| DirError::Watch {
            path: root.to_path_buf(),
            source,
        })?;
    Ok((
        DirWatch {
            _debouncer: debouncer,
        },
        rx,
    ))
}

/// Whether an event can change what the tree reads as. inotify also reports files being
/// opened and closed unwritten (notify 8 asks for IN_OPEN): the daemon's own read of the
/// tree is such a burst, and taking it for a change made every read start the next one, a
/// loop that kept a core busy re-reading 10,000 files for as long as the daemon ran.
fn changes_tree(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// `dir:` + a hash of every path and content: the same tree is the same revision.
pub(crate) fn revision_of(files: &[SourceFile]) -> String {
    // A 0 after each path and content keeps ("ab", "") and ("a", "b") apart.
    let bytes = files.iter().flat_map(|f| {
        f.path
            .bytes()
            .chain([0])
            .chain(f.contents.iter().copied())
            .chain([0])
    });
    format!("dir:{:016x}", crate::spec::names::fnv1a64(bytes))
}

/// A directory as a followed source: read whole on every change its watch reports.
pub struct Dir {
    root: PathBuf,
    /// Kept for as long as the directory is followed: dropping it stops the watch.
    _watch: DirWatch,
}

impl Dir {
    /// Starts watching `root`; the receiver hears its changes.
    pub fn open(root: PathBuf) -> Result<(Dir, mpsc::Receiver<()>), DirError> {
        let (watch, changes) = watch(&root, Duration::from_millis(200))?;
        Ok((
            Dir {
                root,
                _watch: watch,
            },
            changes,
        ))
    }
}

impl super::Followed for Dir {
    const KIND: &'static str = "dir";
    const REASONS: &'static [&'static str] = &["read"];

    fn name(&self) -> String {
        format!("dir:{}", self.root.display())
    }

    async fn read(&self, _again: bool) -> Result<Option<super::Revision>, super::Failure> {
        // Named by what it renders to (`id: None`).
        super::read_tree(&self.root, None)
            .map(Some)
            .map_err(|e| super::Failure::new("read", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_follows_content_and_paths() {
        let f = |p: &str, c: &str| SourceFile {
            path: p.into(),
            contents: c.as_bytes().to_vec(),
        };
        let a = revision_of(&[f("a.toml", "x")]);
        assert_eq!(a, revision_of(&[f("a.toml", "x")]));
        assert_ne!(a, revision_of(&[f("a.toml", "y")]));
        assert_ne!(a, revision_of(&[f("b.toml", "x")]));
        // The separator keeps ("ab","") and ("a","b") apart.
        assert_ne!(revision_of(&[f("ab", "")]), revision_of(&[f("a", "b")]));
    }

    /// The directory read as the daemon reads it, and the hash that names it.
    fn read(root: &Path) -> Result<(String, Vec<SourceFile>), crate::source::TreeError> {
        let files = crate::source::read_tree(root, None)?.files;
        Ok((revision_of(&files), files))
    }

    #[tokio::test]
    async fn a_save_and_a_configmap_style_symlink_swap_are_both_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("..v1")).unwrap();
        std::fs::write(root.join("..v1/a.toml"), "[workspace.a]\nimage = \"x\"\n").unwrap();
        std::os::unix::fs::symlink("..v1", root.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.toml", root.join("a.toml")).unwrap();
        let (_w, mut rx) = watch(root, Duration::from_millis(100)).unwrap();
        let (rev1, _) = read(root).unwrap();

        // The kubelet's update: new data dir, new symlink renamed over `..data`.
        std::fs::create_dir(root.join("..v2")).unwrap();
        std::fs::write(root.join("..v2/a.toml"), "[workspace.a]\nimage = \"y\"\n").unwrap();
        std::os::unix::fs::symlink("..v2", root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no event for the symlink swap");
        let (rev2, files) = read(root).unwrap();
        assert_ne!(rev1, rev2);
        assert!(String::from_utf8_lossy(&files[0].contents).contains("\"y\""));

        // A plain save in a subdirectory.
        std::fs::create_dir(root.join("team")).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        while rx.try_recv().is_ok() {}
        std::fs::write(root.join("team/b.toml"), "[workspace.b]\nimage = \"z\"\n").unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no event for the save");
        assert_eq!(read(root).unwrap().1.len(), 2);
    }

    #[test]
    fn opening_or_reading_a_file_is_no_change() {
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, EventKind, ModifyKind,
        };
        assert!(!changes_tree(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_tree(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(changes_tree(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(changes_tree(&EventKind::Create(CreateKind::File)));
        assert!(changes_tree(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
    }

    /// The daemon's own read of the tree must not count as a change: it started the next
    /// read, for ever.
    #[tokio::test]
    async fn reading_the_tree_does_not_wake_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..20 {
            std::fs::write(
                root.join(format!("{i}.toml")),
                "[workspace.a]\nimage = \"x\"\n",
            )
            .unwrap();
        }
        let (_w, mut rx) = watch(root, Duration::from_millis(50)).unwrap();
        read(root).unwrap();
        // Well past the debounce: an event for the read would be here by now.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(
            rx.try_recv().is_err(),
            "a read of the tree was taken for a change"
        );
        // A real change still is one.
        std::fs::write(root.join("0.toml"), "[workspace.a]\nimage = \"y\"\n").unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no event for the save");
    }
}
