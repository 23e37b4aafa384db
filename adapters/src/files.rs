//! SEC-4: reading a small file named on the command line (a keys file, a secret key) without
//! ever waiting on it or reading without bound: opened non-blocking (a FIFO nobody writes is
//! not waited on), refused unless it is a regular file (a device such as `/dev/zero`, a FIFO,
//! a directory), and read through a byte bound whatever its metadata says.

use std::io::Read;
use std::path::Path;

/// The contents of the regular file at `path`, at most `max` bytes; otherwise an error that
/// starts with `what` (the flag and the path) and says why.
pub fn read_small_regular(path: &Path, what: &str, max: u64) -> Result<Vec<u8>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Non-blocking: opening a FIFO does not wait for a writer; no controlling terminal.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(path).map_err(|e| format!("{what}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{what}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{what}: not a regular file (a device, FIFO or directory is never read)"
        ));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{what}: {e}"))?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > max) {
        return Err(format!("{what}: larger than {max} bytes"));
    }
    Ok(bytes)
}
