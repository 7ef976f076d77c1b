//! A throw-away ext4 file system on a loop device (root only), for tests that need a real file
//! system to fill up or to cut the power of. Everything is done here with the system's own tools
//! (`mkfs.ext4`, `losetup`, `mount`, `umount`) and one ioctl; nothing outside the repository is
//! needed. The operations, by the names the tests use with [`tool`]:
//! - `setup SIZE_MB [BLOCK_SIZE]`: make an ext4 image of SIZE_MB in a fresh temporary directory
//!   (`mkfs.ext4`, with BLOCK_SIZE 1024, 2048 or 4096 if given; else mkfs's default), attach a loop
//!   device, mount it; returns the mount directory;
//! - `cut DIR`: `EXT4_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH` on the file system mounted at
//!   DIR (what was not fsynced is dropped, as by a power cut; see [`cut_now`]);
//! - `remount DIR`: unmount and mount again (journal replay);
//! - `teardown DIR`: unmount, detach the loop device, remove the image;
//! - `available`: whether this machine can do all that (root, `/dev/loop-control`, the tools).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `program args`; `Err` with its stderr if it fails.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The loop device a mount directory made by `setup` is on (recorded beside it).
fn device_of(mount: &Path) -> String {
    let record = mount.parent().unwrap().join("loop-device");
    std::fs::read_to_string(&record).unwrap_or_else(|e| panic!("{}: {e}", record.display())).trim().to_owned()
}

/// Unmounts `mount`, retrying while a process that was just killed still holds files there.
fn unmount(mount: &str) -> Result<String, String> {
    let mut last = Err(String::new());
    for _ in 0..50 {
        last = run("umount", &[mount]);
        if last.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    last
}

/// Does one operation (see the module documentation); panics with what failed.
pub fn tool(args: &[&str]) -> String {
    let done = match args {
        ["setup", size_mb, rest @ ..] => setup(size_mb.parse().unwrap(), rest.first().map(|b| b.parse().unwrap())),
        ["cut", mount] => {
            cut_now(Path::new(mount));
            Ok(String::new())
        }
        ["remount", mount] => {
            let device = device_of(Path::new(mount));
            unmount(mount).and_then(|_| run("mount", &[&device, mount]))
        }
        ["teardown", mount] => Ok(teardown(Path::new(mount))),
        _ => Err(format!("unknown operation {args:?}")),
    };
    done.unwrap_or_else(|e| panic!("ext4 {args:?}: {e}"))
}

fn setup(size_mb: u64, block_size: Option<u64>) -> Result<String, String> {
    let dir = tempfile::Builder::new().prefix("strata-ext4-").tempdir().map_err(|e| e.to_string())?.keep();
    let image = dir.join("image");
    std::fs::File::create(&image).and_then(|f| f.set_len(size_mb << 20)).map_err(|e| e.to_string())?;
    let image = image.to_string_lossy().into_owned();
    let block = block_size.map(|b| b.to_string());
    let mut mkfs = vec!["-F", "-q"];
    if let Some(block) = &block {
        mkfs.extend(["-b", block.as_str()]);
    }
    mkfs.push(&image);
    run("mkfs.ext4", &mkfs)?;
    let device = run("losetup", &["--find", "--show", &image])?;
    std::fs::write(dir.join("loop-device"), &device).map_err(|e| e.to_string())?;
    let mount = dir.join("mnt");
    std::fs::create_dir(&mount).map_err(|e| e.to_string())?;
    let mount = mount.to_string_lossy().into_owned();
    run("mount", &[&device, &mount])?;
    Ok(mount)
}

/// Unmounts (lazily if it must), detaches and removes; best effort (it runs in `Drop`).
fn teardown(mount: &Path) -> String {
    let text = mount.to_string_lossy();
    if unmount(&text).is_err() {
        let _ = run("umount", &["-l", &text]);
    }
    if let Some(dir) = mount.parent().filter(|d| d.join("loop-device").exists()) {
        let _ = run("losetup", &["-d", &device_of(mount)]);
        let _ = std::fs::remove_dir_all(dir);
    }
    String::new()
}

/// Cuts the power of the file system mounted at `mount` now, as the `cut` operation does
/// (`EXT4_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH`): it lands within microseconds of when
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
    let root = run("id", &["-u"]).is_ok_and(|uid| uid == "0");
    let loops = Path::new("/dev/loop-control").exists();
    let tools =
        ["mkfs.ext4", "losetup", "mount", "umount"].iter().all(|t| Command::new(t).arg("--version").output().is_ok());
    assert!(
        root && loops && tools,
        "cannot mount a throw-away ext4 here: this test needs root, loop devices (/dev/loop-control), mkfs.ext4, \
         losetup, mount and umount (tests/common/ext4.rs)"
    );
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
        teardown(&self.0);
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
