//! Test doubles of nish-driver, kept out of the daemon's build.
//!
//! - [`mock`]: the mock desktop, an in-process fake of the [`nish_decider::backend::Backend`]
//!   for contract tests on any machine, with a simulated person;
//! - [`testconsent`]: consent answered through files, for the Wayland end-to-end test's one
//!   request whose content it checks;
//! - [`person`]: the test daemon's own socket for the simulated person.
//!
//! The test daemon `nish-testd` serves them with the decider and the agent host of the real
//! daemon. `nish-driver` depends on none of this.

pub mod mock;
pub mod person;
pub mod testconsent;
