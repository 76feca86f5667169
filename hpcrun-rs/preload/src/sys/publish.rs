//! [`Published`]: a value published once per update and read without
//! locks from any thread and from signal handlers.

use super::mem::ZeroInit;

/// A value published once per update and then only read, from any thread
/// and from signal handlers: a pointer to a leaked box. Old values are never
/// freed, so a reader's reference stays valid forever.
pub struct Published<T>(std::sync::atomic::AtomicPtr<T>);

impl<T> Published<T> {
    pub const fn new() -> Self {
        Published(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()))
    }

    pub fn publish(&self, value: T) -> &'static T {
        let leaked: &'static mut T = Box::leak(Box::new(value));
        self.0.store(leaked, std::sync::atomic::Ordering::Release);
        leaked
    }

    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: non-null pointers stored here come from `Box::leak` and
        // are never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

// SAFETY: a null AtomicPtr is all zeroes.
unsafe impl<T: Sync> ZeroInit for Published<T> {}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Self::new()
    }
}
