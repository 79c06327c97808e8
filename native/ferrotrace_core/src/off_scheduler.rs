//! Running a closure on a short-lived thread of its own, so that what it leaves in
//! thread-local storage is destroyed when that thread ends, not on the caller's thread.
//!
//! Why: std's `thread::Builder::spawn` touches thread-locals with destructors on the thread
//! that calls it (the spawn hooks, the current thread's handle). glibc counts each such
//! destructor against the library whose code registered it and refuses to unmap the library
//! (`dlclose` is a no-op) while the count is not zero, which for an Erlang scheduler thread
//! is forever. A session started from a management NIF would thus pin the NIF library in
//! memory after its module is purged (`ferrotrace detach` promises that no library stays
//! mapped). Spawning from a thread made with `pthread_create`, which runs and clears its
//! destructors when it exits, leaves the scheduler thread with none.

//!
//! The NIF library pins itself instead ([`pin`]) unless `ferrotrace attach` loaded it: a
//! reload then finds the stopped sessions' figures as before.

use std::ffi::c_void;

/// Keeps the library holding the code at `address` (a function's address, never read)
/// mapped for the life of the process (glibc's `RTLD_NODELETE`, set on the object already
/// loaded: `RTLD_NOLOAD` opens nothing new).
/// Returns whether it could.
pub fn pin(address: usize) -> bool {
    // SAFETY: an all-zero Dl_info (null pointers) is valid for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only looks `address` up among the loaded objects and writes `info`.
    if unsafe { libc::dladdr(address as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: `dli_fname` is the loader's NUL-terminated path of that object.
    let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    !handle.is_null()
}

struct Job<F, R> {
    work: Option<F>,
    result: Option<std::thread::Result<R>>,
}

extern "C" fn run_job<F: FnOnce() -> R, R>(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `Job` that `run` keeps alive until it has joined this thread,
    // and nothing else touches it meanwhile.
    let job = unsafe { &mut *arg.cast::<Job<F, R>>() };
    if let Some(work) = job.work.take() {
        job.result = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    }
    std::ptr::null_mut()
}

/// Runs `work` on a new thread and returns its value (a panic is resumed here). If no
/// thread can be made, `work` runs on the caller's thread.
pub fn run<F: FnOnce() -> R + Send, R: Send>(work: F) -> R {
    let mut job = Job { work: Some(work), result: None };
    // SAFETY: a zeroed pthread_t is a valid place for pthread_create to write to.
    let mut thread: libc::pthread_t = unsafe { std::mem::zeroed() };
    let arg = std::ptr::addr_of_mut!(job).cast::<c_void>();
    // SAFETY: `run_job::<F, R>` matches the start routine's signature and reads `arg` as
    // the `Job<F, R>` it is; the thread is joined below before `job` goes out of scope.
    let created = unsafe { libc::pthread_create(&mut thread, std::ptr::null(), run_job::<F, R>, arg) };
    if created == 0 {
        // SAFETY: `thread` was created above, joinable, and is joined once.
        unsafe { libc::pthread_join(thread, std::ptr::null_mut()) };
    }
    match (job.result.take(), job.work.take()) {
        (Some(Ok(value)), _) => value,
        (Some(Err(panic)), _) => std::panic::resume_unwind(panic),
        (None, Some(work)) => work(),
        (None, None) => unreachable!("the job ran and set its result"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn returns_the_value_and_runs_on_another_thread() {
        let here = std::thread::current().id();
        let (value, there) = super::run(|| (42, std::thread::current().id()));
        assert_eq!(value, 42);
        assert_ne!(here, there);
    }

    #[test]
    fn resumes_a_panic() {
        let caught = std::panic::catch_unwind(|| super::run(|| -> u32 { panic!("inside") }));
        assert!(caught.is_err());
    }
}
