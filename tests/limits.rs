//! Bounded input (issue #20, item 8): a spec tree is capped in files and bytes, whether
//! read from a directory or from a git commit, and a broken file's errors past the cap
//! are counted, not built. As in `tests/hostile.rs`, nothing here is timed: the work done
//! is asserted (what was read, how much was allocated), not how long it took.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

use driftless::source::git::{GitAuth, GitConfig, GitRef, GitSource};
use driftless::spec::{
    LoadError, MAX_ERRORS_PER_FILE, MAX_FILE_BYTES, MAX_TREE_BYTES, MAX_TREE_FILES, SourceFile,
    parse_files, read_dir,
};

/// Counts the allocations of the thread that makes them (tests run on threads of their
/// own, so one test's count is not another's).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: a thread being torn down has no counter left, and allocates anyway.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const TOO_MANY_FILES: &str =
    "the spec tree has more than 50000 spec files, the limit for a tree; not read";
const TOO_MANY_BYTES: &str =
    "the spec tree's files hold more than 64 MiB, the limit for a tree; not read";

/// A 4 MiB file of garbage gives an error per token, millions of them: the first hundred
/// are built, the rest only counted. The TOML reader's recovering parse built every one
/// (6.3 million messages, 1.3 GiB) before all but 100 were dropped; now the whole load
/// makes a few hundred allocations (805 when written), not millions (16.8 million).
#[test]
fn a_broken_file_builds_only_the_errors_it_shows() {
    let text = "=\n".repeat(MAX_FILE_BYTES / 2);
    let file = SourceFile {
        path: "garbage.toml".into(),
        contents: text.into_bytes(),
    };
    let before = allocations();
    let errors = parse_files(std::slice::from_ref(&file)).unwrap_err();
    let made = allocations() - before;
    assert!(
        made < 10_000,
        "{made} allocations to report {} errors",
        errors.0.len()
    );
    assert_eq!(errors.0.len(), MAX_ERRORS_PER_FILE + 1);
    assert_eq!(
        errors.0[0].to_string(),
        "garbage.toml:1:1: invalid TOML: unquoted keys cannot be empty, expected letters, numbers, `-`, `_`"
    );
    let last = errors.0.last().unwrap().to_string();
    // Two errors a line (an empty key, a missing value), every one counted.
    let more = MAX_FILE_BYTES - MAX_ERRORS_PER_FILE;
    assert_eq!(
        last,
        format!(
            "garbage.toml:{}:1: {more} more errors in this file not shown (only the first 100 are)",
            MAX_FILE_BYTES / 2 + 1
        )
    );
}

/// One file past the tree's file limit, in a directory: refused, naming the limit.
#[test]
fn a_directory_of_too_many_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("a.toml"), "# nothing\n").unwrap();
    // Links to one file: a tree of many files without writing each (each is read).
    for i in 1..MAX_TREE_FILES {
        std::os::unix::fs::symlink("a.toml", root.join(format!("{i}.toml"))).unwrap();
    }
    // Exactly at the limit is fine.
    assert_eq!(read_dir(root).unwrap().len(), MAX_TREE_FILES);
    std::os::unix::fs::symlink("a.toml", root.join("one-more.toml")).unwrap();
    let e = read_dir(root).unwrap_err();
    assert!(matches!(e, LoadError::TooLarge { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("spec root {}: {TOO_MANY_FILES}", root.display())
    );
    // Files that are not specs do not count.
    std::fs::remove_file(root.join("one-more.toml")).unwrap();
    std::os::unix::fs::symlink("a.toml", root.join("notes.txt")).unwrap();
    assert_eq!(read_dir(root).unwrap().len(), MAX_TREE_FILES);
}

/// Many files under the per-file limit that together pass the tree's byte limit.
#[test]
fn a_directory_of_too_many_bytes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut big = b"#".repeat(MAX_FILE_BYTES - 1);
    big.push(b'\n');
    std::fs::write(root.join("0.toml"), &big).unwrap();
    let fit = MAX_TREE_BYTES / MAX_FILE_BYTES;
    for i in 1..fit {
        std::os::unix::fs::symlink("0.toml", root.join(format!("{i}.toml"))).unwrap();
    }
    assert_eq!(read_dir(root).unwrap().len(), fit);
    std::fs::write(root.join("z.toml"), "# one byte too many\n").unwrap();
    let e = read_dir(root).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("spec root {}: {TOO_MANY_BYTES}", root.display())
    );
    // Through the loader (validate, render, diff, apply): the same error.
    let e = driftless::spec::load_dir(root).unwrap_err();
    assert!(e.to_string().ends_with(TOO_MANY_BYTES), "{e}");
}

/// Files handed over by any other reader are held to the same limits by the loader.
#[test]
fn the_loader_refuses_a_tree_past_the_limits() {
    let files: Vec<SourceFile> = (0..=MAX_TREE_FILES)
        .map(|i| SourceFile {
            path: format!("{i}.toml"),
            contents: Vec::new(),
        })
        .collect();
    let e = parse_files(&files).unwrap_err();
    assert_eq!(e.to_string(), format!(".:1:1: {TOO_MANY_FILES}"));
    assert!(parse_files(&files[..MAX_TREE_FILES]).is_ok());
}

/// A commit whose spec root holds `names`, every one the same blob of `contents` (a tree
/// of thousands of entries costs one blob and one tree object).
fn commit_tree(repo_dir: &Path, contents: &[u8], names: impl Iterator<Item = String>) {
    let repo = git2::Repository::init(repo_dir).unwrap();
    let blob = repo.blob(contents).unwrap();
    let mut tree = repo.treebuilder(None).unwrap();
    for name in names {
        tree.insert(&name, blob, 0o100644).unwrap();
    }
    let tree = repo.find_tree(tree.write().unwrap()).unwrap();
    let who = git2::Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("refs/heads/main"), &who, &who, "specs", &tree, &[])
        .unwrap();
}

fn fetch_error(repo_dir: &Path) -> String {
    let cache = tempfile::tempdir().unwrap();
    let source = GitSource::open(GitConfig {
        url: format!("file://{}", repo_dir.display()),
        reference: GitRef::Branch("main".into()),
        path: None,
        cache_dir: cache.path().to_path_buf(),
        needs_checkout: driftless::hydrate::needs_checkout,
        verify: Vec::new(),
        auth: GitAuth::None,
    })
    .unwrap();
    match source.fetch() {
        Ok(rev) => panic!("{} files read", rev.files.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_commit_of_too_many_files_is_refused() {
    let repo = tempfile::tempdir().unwrap();
    commit_tree(
        repo.path(),
        b"# nothing\n",
        (0..=MAX_TREE_FILES).map(|i| format!("{i}.toml")),
    );
    let e = fetch_error(repo.path());
    assert!(
        e.starts_with("reading commit ") && e.ends_with(TOO_MANY_FILES),
        "{e}"
    );
}

#[test]
fn a_commit_of_too_many_bytes_is_refused() {
    let repo = tempfile::tempdir().unwrap();
    let fit = MAX_TREE_BYTES / MAX_FILE_BYTES;
    commit_tree(
        repo.path(),
        &b"#".repeat(MAX_FILE_BYTES),
        (0..=fit).map(|i| format!("{i}.toml")),
    );
    let e = fetch_error(repo.path());
    assert!(
        e.starts_with("reading commit ") && e.ends_with(TOO_MANY_BYTES),
        "{e}"
    );
}
