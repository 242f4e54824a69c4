//! A desktop shared by the tests of one test binary, instead of one desktop per test.
//!
//! Tests that leave a desktop as they found it (their own windows and connections, gone when
//! the test ends; nothing done to the desktop itself) take turns on one desktop:
//!
//! ```no_run
//! use nish_testdesk::{Desktop, Shared};
//!
//! static DESK: Shared<Desktop> = Shared::new(|| Desktop::builder().atspi(false).start());
//!
//! fn a_test() {
//!     let desk = DESK.lock();
//!     let (conn, _) = x11rb::connect(Some(&desk.display_name())).unwrap();
//!     // ...
//! }
//! ```
//!
//! The first test that asks starts the desktop. [`Shared::lock`] gives it to one test at a
//! time (the harness runs a binary's tests on several threads), so a test sees nothing another
//! test does meanwhile. The desktop is torn down when the test process exits (an exit handler:
//! the harness returns from `main` when every test passed and calls `exit` when one failed), as
//! a desktop of one test's own is when it is dropped; a test process that is killed takes the
//! desktop's processes with it (their parent-death signal, see [`crate::Desktop`]).
//!
//! A test that fails while it holds the desktop hands it on as it was left, so a desktop the
//! tests change (killed processes, a grabbed server, settings) is not for sharing: such tests
//! keep a desktop of their own.

use std::ops::Deref;
use std::sync::{Mutex, MutexGuard, Once, TryLockError};

use anyhow::Result;

/// A desktop (a [`crate::Desktop`] or a [`crate::WaylandDesktop`]) for the tests of one binary:
/// started on first use, one test at a time, torn down at exit. See the module's doc.
pub struct Shared<T: Send + 'static> {
    start: fn() -> Result<T>,
    slot: Mutex<Option<T>>,
}

impl<T: Send + 'static> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let started = match self.slot.try_lock() {
            Ok(g) => Some(g.is_some()),
            Err(TryLockError::Poisoned(e)) => Some(e.get_ref().is_some()),
            Err(TryLockError::WouldBlock) => None,
        };
        f.debug_struct("Shared")
            .field("started", &started)
            .finish_non_exhaustive()
    }
}

/// One test's turn on a [`Shared`] desktop; the next test's turn begins when it is dropped.
pub struct SharedGuard<T: 'static>(MutexGuard<'static, Option<T>>);

impl<T: 'static> std::fmt::Debug for SharedGuard<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedGuard").finish_non_exhaustive()
    }
}

impl<T: 'static> Deref for SharedGuard<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("a shared desktop is started before it is handed out")
    }
}

impl<T: Send + 'static> Shared<T> {
    /// A desktop that `start` brings up when a test first asks for it.
    pub const fn new(start: fn() -> Result<T>) -> Shared<T> {
        Shared {
            start,
            slot: Mutex::new(None),
        }
    }

    /// Waits for the other tests' turns to end, then gives the desktop to the caller (starting
    /// it first if no test has yet). Panics when it cannot be started; the next test that asks
    /// tries again.
    pub fn lock(&'static self) -> SharedGuard<T> {
        // A test that failed with the desktop hands it on as it was (see the module).
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let desk = (self.start)().unwrap_or_else(|e| panic!("the shared desktop: {e:#}"));
            *slot = Some(desk);
            register(self);
        }
        SharedGuard(slot)
    }
}

/// What the exit handler does to each started [`Shared`].
trait TearDown: Sync {
    fn tear_down(&self);
}

impl<T: Send + 'static> TearDown for Shared<T> {
    fn tear_down(&self) {
        let desk = match self.slot.try_lock() {
            Ok(mut slot) => slot.take(),
            Err(TryLockError::Poisoned(e)) => e.into_inner().take(),
            // Still held at exit (a test thread the harness did not wait for): its processes
            // end with the test process through their parent-death signal.
            Err(TryLockError::WouldBlock) => None,
        };
        drop(desk);
    }
}

/// The shared desktops started in this process, torn down by [`tear_down_all`].
static STARTED: Mutex<Vec<&'static dyn TearDown>> = Mutex::new(Vec::new());

fn register(shared: &'static dyn TearDown) {
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        if !crate::sys::at_exit(tear_down_all) {
            eprintln!("nish-testdesk: no exit handler; shared desktops end with the process");
        }
    });
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(shared);
}

/// The exit handler: tears every started shared desktop down, the newest first. It must not
/// unwind (it is called from C), so a panic in a teardown is caught here.
extern "C" fn tear_down_all() {
    let _ = std::panic::catch_unwind(|| {
        let started = std::mem::take(&mut *STARTED.lock().unwrap_or_else(|e| e.into_inner()));
        for shared in started.into_iter().rev() {
            shared.tear_down();
        }
    });
}
