//! Disk images made by the real tools, for the image tests (the ends
//! driven directly in `image`, the options through the binary in
//! `image_copy`): a real ext4 filesystem written without mounting it, and
//! bmaptool's own map of an image, the oracle ddx's maps are held to, and
//! files compressed by the compression tools.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::must_run;

/// A sparse ext4 image of `size` bytes at `dir/ext4.img`, holding
/// `files` (paths relative to its root, with their bytes), made by
/// `mkfs.ext4 -d` from a copy of them in `dir/content`. The caller has
/// checked that mkfs.ext4 is installed.
pub fn ext4_image(dir: &Path, size: u64, files: &[(String, Vec<u8>)]) -> PathBuf {
    let content = dir.join("content");
    for (name, bytes) in files {
        let path = content.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let image = dir.join("ext4.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(size)
        .unwrap();
    must_run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-E"])
            .args(["lazy_itable_init=1,nodiscard", "-d"])
            .arg(&content)
            .arg(&image),
    );
    image
}

/// bmaptool's map of `image`, written to `map`.
pub fn bmaptool_create(image: &Path, map: &Path) {
    must_run(
        Command::new("bmaptool")
            .args(["-q", "create", "-o"])
            .arg(map)
            .arg(image),
    );
}

/// `bmaptool copy` of `image` onto `to` (a file or a device) with `map`:
/// the reference ddx's `--bmap` is held to.
pub fn bmaptool_copy(map: &Path, image: &Path, to: &Path) {
    must_run(
        Command::new("bmaptool")
            .args(["-q", "copy", "--bmap"])
            .arg(map)
            .arg(image)
            .arg(to),
    );
}

/// `file` compressed by `tool` (`TOOL -c`) into `file.EXT`.
pub fn packed(file: &Path, tool: &str, ext: &str) -> PathBuf {
    let out = PathBuf::from(format!("{}.{ext}", file.display()));
    let bytes = must_run(Command::new(tool).arg("-c").arg(file));
    std::fs::write(&out, bytes).unwrap();
    out
}
