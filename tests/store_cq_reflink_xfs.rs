//! A consume queue's active file whose blocks another file shares (a `cp` of a live store on XFS:
//! coreutils' `cp` reflinks by default), on a full XFS. A store into a shared block must copy it
//! (copy on write), which needs a free block: through a writable map that is a SIGBUS killing the
//! process, where a `pwrite` fails with ENOSPC and the put reports the full disk. "Every block
//! allocated" does not mean a store cannot fault on a file system that copies on write.
//!
//! Needs root, loop devices and `mkfs.xfs` (xfsprogs):
//! `cargo test --release --test store_cq_reflink_xfs -- --ignored`.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use strata_log::{Error, LogConfig, Message, MessageStore, StoreConfig};

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A 320 MiB XFS (reflink on, mkfs's default) mounted on a loop device; unmounted when dropped.
struct Xfs {
    dir: tempfile::TempDir,
}

impl Xfs {
    fn new() -> Xfs {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("image");
        std::fs::File::create(&image).unwrap().set_len(320 << 20).unwrap();
        run("mkfs.xfs", &["-q", "-m", "reflink=1", image.to_str().unwrap()]);
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        run("mount", &["-o", "loop", image.to_str().unwrap(), dir.path().join("mnt").to_str().unwrap()]);
        Xfs { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

/// Takes every free block of the file system at `dir`.
fn fill(dir: &Path) {
    let mut n = 0;
    for size in ["64M", "16M", "4M", "1M", "256K", "64K", "16K", "4K"] {
        loop {
            n += 1;
            let file = dir.join(format!("fill{n}"));
            let mut fallocate = Command::new("fallocate");
            fallocate.args(["-l", size]).arg(&file).stderr(std::process::Stdio::null());
            if !fallocate.status().unwrap().success() {
                let _ = std::fs::remove_file(&file);
                break;
            }
        }
    }
    for _ in 0..5 {
        let mut file = std::fs::OpenOptions::new().append(true).open(dir.join("fill1")).unwrap();
        while file.write_all(&[1u8; 4096]).is_ok() {}
        let _ = file.sync_all();
    }
}

#[test]
#[ignore = "opt-in: needs root, loop devices and mkfs.xfs; cargo test --release --test store_cq_reflink_xfs -- --ignored"]
fn a_put_into_a_shared_queue_block_on_a_full_xfs_is_an_error_not_a_sigbus() {
    let xfs = Xfs::new();
    // In a child process (this test binary again): a SIGBUS must fail the test, not skip the
    // unmount.
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "puts_on_a_full_xfs", "--nocapture"])
        .env("STRATA_XFS_DIR", xfs.path())
        .status()
        .unwrap();
    assert!(child.success(), "the puts on the full XFS: {child}");
}

#[test]
#[ignore = "the child process of the test above"]
fn puts_on_a_full_xfs() {
    let dir = PathBuf::from(std::env::var("STRATA_XFS_DIR").expect("run by the test above"));
    let root = dir.join("store");
    let config = StoreConfig {
        log: LogConfig { segment_bytes: 8 << 20, ..StoreConfig::default().log },
        queue_entries_per_file: 100_000,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(&root, config).unwrap();
    for i in 0..10 {
        store.put(&Message::new("a", 0, format!("m{i}"))).unwrap();
    }
    let queue_dir = root.join("consumequeue/a/0");
    let cq = std::fs::read_dir(&queue_dir).unwrap().next().unwrap().unwrap().path();
    // A backup of the live queue file sharing its blocks.
    run("cp", &["--reflink=always", cq.to_str().unwrap(), dir.join("backup.cq").to_str().unwrap()]);
    fill(&dir);
    for i in 10..1_000 {
        match store.put(&Message::new("a", 0, format!("m{i}"))) {
            Ok(_) => {}
            Err(error @ Error::DispatchFailed { .. }) => {
                assert!(error.to_string().contains("space"), "{error}");
                return;
            }
            Err(error) => panic!("put {i}: {error}"),
        }
    }
    panic!("the disk never filled");
}
