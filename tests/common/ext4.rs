//! A throw-away ext4 file system on a loop device (`../shared/tools/powercut`, root only), for
//! tests that need a real file system to fill up or to cut the power of.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The tool: `STRATA_POWERCUT`, default `../shared/tools/powercut` beside the repository (the
/// workspace root, whichever of its packages runs the test).
pub fn powercut() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.ancestors().find(|dir| dir.join("Cargo.lock").exists()).unwrap_or(manifest);
    std::env::var_os("STRATA_POWERCUT").map(PathBuf::from).unwrap_or_else(|| root.join("../shared/tools/powercut"))
}

/// Runs the tool; panics with its stderr if it fails.
pub fn tool(args: &[&str]) -> String {
    let out = Command::new(powercut()).args(args).output().unwrap();
    assert!(out.status.success(), "powercut {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Cuts the power of the file system mounted at `mount` now, as `powercut cut` does
/// (`EXT4_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH`), but from this process: the tool is a
/// Python script that takes tens of milliseconds to start, this lands within microseconds of when
/// it is called.
#[allow(unsafe_code)]
pub fn cut_now(mount: &Path) {
    use rustix::ioctl::{Opcode, Setter, ioctl, opcode};
    // `_IOR('X', 125, __u32)` in linux/fs.h (ext4.h before 6.x).
    const EXT4_IOC_SHUTDOWN: Opcode = opcode::read::<u32>(b'X', 125);
    const _: () = assert!(EXT4_IOC_SHUTDOWN as u64 == 0x8004_587D);
    const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
    let dir = std::fs::File::open(mount).unwrap();
    // SAFETY: EXT4_IOC_SHUTDOWN reads one u32 (the flags) through the pointer, which is what the
    // Setter holds and passes.
    let shut = unsafe { ioctl(&dir, Setter::<EXT4_IOC_SHUTDOWN, u32>::new(EXT4_GOING_FLAGS_NOLOGFLUSH)) };
    shut.unwrap_or_else(|e| panic!("EXT4_IOC_SHUTDOWN on {}: {e}", mount.display()));
}

/// Panics with a clear message unless this machine can mount images (an `#[ignore]`d test run
/// with `--ignored` must fail, not pass, when it cannot do its job).
pub fn require_available() {
    let ok = Command::new(powercut()).arg("available").status().is_ok_and(|s| s.success());
    assert!(ok, "powercut is not available here: this test needs root, loop devices and mkfs.ext4");
}

/// A mounted image, unmounted and removed however the test ends.
pub struct Mount(pub PathBuf);

impl Mount {
    /// A fresh ext4 of `size_mb` MB (block size chosen by mkfs unless `block_size`).
    pub fn new(size_mb: u64, block_size: Option<u64>) -> Mount {
        require_available();
        let size = size_mb.to_string();
        let block = block_size.map(|b| b.to_string());
        let mut args = vec!["setup", size.as_str()];
        args.extend(block.as_deref());
        Mount(PathBuf::from(tool(&args)))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new(powercut()).args(["teardown", &self.0.to_string_lossy()]).output();
    }
}

/// Fills the file system holding `dir` with `dir/filler` until no block is left; returns its path.
pub fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0xAAu8; 1 << 16];
    loop {
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // Also the last partial chunk's worth of blocks.
    for size in [4096usize, 1024] {
        while file.write_all(&vec![0xAA; size]).is_ok() {}
    }
    let _ = file.sync_all();
    path
}
