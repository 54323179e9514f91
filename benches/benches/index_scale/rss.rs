//! Resident memory of the bench process (`/proc/self/status`), and handing freed heap pages
//! back to the system first so that a figure counts what is held, not what was freed.

/// `VmRSS` and `VmHWM` in bytes (0 where the file or line is missing: not Linux).
pub fn resident() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Returns the allocator's free pages to the system (glibc's `malloc_trim`; nothing elsewhere).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's malloc_trim takes a byte count and only releases free memory.
        unsafe {
            malloc_trim(0);
        }
    }
}
