//! How long libtorch's OpenMP workers wait for work before they sleep, the same however a binary
//! starts (`cargo run`, by hand, `mpirun`, a script).
//!
//! libtorch's workers (GNU libgomp) spin `GOMP_SPINCOUNT` times after a parallel op before they
//! sleep, and libgomp reads the variable once, in its own initializer, before `main` runs. Spinning
//! for GOMP's default (300,000 spins, about a millisecond) takes the cores the env threads need
//! right after the policy's forward pass; not spinning (`OMP_WAIT_POLICY=PASSIVE`) makes every small
//! parallel op wake sleeping threads. 1000 spins (about 10 us) measured best (docs/benchmarks.md).
//!
//! `.cargo/config.toml` sets it for `cargo run` and `cargo test`. A binary started without it sets
//! it and executes itself again, same process id and arguments, from its ELF preinit array: the
//! loader runs that before any library's initializer (libgomp's, libtorch's), so the first image
//! costs only the libraries' loading. A value the user exported is kept; where /proc/self/exe
//! cannot be executed, the run goes on with libgomp's default.

/// The spin count a binary's libgomp gets unless `GOMP_SPINCOUNT` is already set.
const SPIN_COUNT: &std::ffi::CStr = c"GOMP_SPINCOUNT=1000";

#[cfg(target_os = "linux")]
extern "C" fn spin_count_or_exec(
    _argc: i32,
    argv: *const *const std::ffi::c_char,
    envp: *const *const std::ffi::c_char,
) {
    extern "C" {
        fn execve(
            path: *const std::ffi::c_char,
            argv: *const *const std::ffi::c_char,
            envp: *const *const std::ffi::c_char,
        ) -> i32;
    }
    // the environment as a pointer array on the stack (no allocator yet), GOMP_SPINCOUNT appended
    let mut env = [std::ptr::null::<std::ffi::c_char>(); 4096];
    let mut n = 0;
    // SAFETY: the loader passes the process's NULL-terminated environment, each entry a C string
    unsafe {
        while !(*envp.add(n)).is_null() {
            if n + 2 >= env.len() || std::ffi::CStr::from_ptr(*envp.add(n)).to_bytes().starts_with(b"GOMP_SPINCOUNT=") {
                return; // set already (or an environment too large to copy: libgomp's default)
            }
            env[n] = *envp.add(n);
            n += 1;
        }
    }
    env[n] = SPIN_COUNT.as_ptr();
    // SAFETY: argv as the loader gave it, env NULL-terminated; execve returns only when it fails
    unsafe { execve(c"/proc/self/exe".as_ptr(), argv, env.as_ptr()) };
}

/// The loader calls an executable's preinit functions before the initializers of its libraries;
/// only an executable has them (a test checks every binary's).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".preinit_array"]
static SPIN_COUNT_OR_EXEC: extern "C" fn(i32, *const *const std::ffi::c_char, *const *const std::ffi::c_char) =
    spin_count_or_exec;
