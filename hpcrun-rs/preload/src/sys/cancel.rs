//! The calling thread's cancellation state (`pthread_setcancelstate`).
//!
//! A program may cancel its threads (`pthread_cancel`). A deferred
//! cancellation acts at the next cancellation point the thread reaches:
//! `open`, `read`, `write`, `close`, `nanosleep` and the like, also when
//! the library makes them on the thread's behalf (reading a module's
//! symbols at `dlopen`, writing a profile or a message, inside a sample
//! handler). Acting there, glibc's forced unwinding would run through the
//! library's frames with its locks held and end the thread in the middle
//! of the library's work: the next thread to take those locks waits for
//! ever. [`NoCancel`] holds cancellation off while the library works; a
//! pending cancellation acts at the program's next cancellation point,
//! as it would natively.

/// glibc's values of the states (`<pthread.h>`).
const PTHREAD_CANCEL_ENABLE: libc::c_int = 0;
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// Cancellation of the calling thread held off while this lives: the
/// thread's previous state comes back when it is dropped. Lock-free (an
/// atomic update of the thread's descriptor in glibc), so a signal
/// handler may use it too.
pub struct NoCancel {
    old: libc::c_int,
}

impl NoCancel {
    pub fn new() -> NoCancel {
        let mut old = PTHREAD_CANCEL_ENABLE;
        // SAFETY: `old` is a valid place for the previous state; the call
        // changes only the calling thread's cancellation state.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
        NoCancel { old }
    }
}

impl Default for NoCancel {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoCancel {
    fn drop(&mut self) {
        if self.old != PTHREAD_CANCEL_DISABLE {
            let mut was = 0;
            // SAFETY: as in `new`.
            unsafe { pthread_setcancelstate(self.old, &mut was) };
        }
    }
}
