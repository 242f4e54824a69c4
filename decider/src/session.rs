//! The session state machine: consent, lease, input mode, takeover, pause and the kill switch.
//!
//! Pure: no I/O, no clock (callers pass `now_ms`), no async. The engine keeps one per host
//! connection, asks it before every call ([`SessionState::check_call`]) and applies the
//! transitions the person, the host and the backend cause. Property tests drive random
//! operation sequences through it and check the invariants after every step.
//!
//! ```text
//!  Idle --start_session--> Pending --allow--> Granted --lease end--> Expired
//!   ^                        |  deny             |  end_session          | start_session
//!   +------------------------+-------------------+-----------------------+
//!  any --kill switch--> Stopped (terminal)     any --session.revoke--> Revoked (terminal)
//! ```
//! Orthogonal to the phase: the takeover (on, indicator shown) and `paused`, which only a
//! resume (the indicator's Continue or the host's `takeover.resume`) clears; end_session, a new
//! consent and a switch to headless leave it set (contract §4.3).

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::ProcIdentity;
use nish_proto::tools::ToolClass;

/// The session's input mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputMode {
    /// Accessibility only.
    Headless,
    /// Synthetic input with the visible indicator.
    Takeover,
}

impl InputMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            InputMode::Headless => "headless",
            InputMode::Takeover => "takeover",
        }
    }
}

/// Why a takeover paused (contract §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausedReason {
    /// The pointer moved more than 8 px from where the driver put it.
    PointerMoved,
    /// A key the driver did not send.
    KeyPressed,
    /// A button the driver did not send.
    ButtonPressed,
    /// Input the driver did not send, of a kind the desktop does not tell (Wayland: mutter's
    /// idle monitor resets on every input and says nothing more).
    PersonInput,
}

impl PausedReason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PausedReason::PointerMoved => "pointer_moved",
            PausedReason::KeyPressed => "key_pressed",
            PausedReason::ButtonPressed => "button_pressed",
            PausedReason::PersonInput => "person_input",
        }
    }
}

/// Who resumed a paused takeover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeBy {
    /// The person clicked the indicator's Continue.
    Indicator,
    /// The host sent `takeover.resume` on its control pipe.
    Host,
}

impl ResumeBy {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResumeBy::Indicator => "indicator",
            ResumeBy::Host => "host",
        }
    }
}

/// Where the session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No session (never started, ended, or consent denied).
    Idle,
    /// The consent dialog is up.
    Pending,
    /// The person allowed it; the lease runs.
    Granted,
    /// The lease ended; a new consent is needed.
    Expired,
    /// The kill switch stopped it; nothing more happens on this connection.
    Stopped,
    /// The host revoked it; nothing more happens on this connection.
    Revoked,
}

impl Phase {
    /// The wire spelling of `state` in session results.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "none",
            Phase::Pending => "consent_pending",
            Phase::Granted => "granted",
            Phase::Expired => "expired",
            Phase::Stopped => "stopped",
            Phase::Revoked => "revoked",
        }
    }

    /// True for phases nothing leaves.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Stopped | Phase::Revoked)
    }
}

/// One approved app: its name and the processes it had when the person approved it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppGrant {
    /// The app's name as the dialog showed it.
    pub name: String,
    /// The process identities (pid and start time) approved.
    pub processes: Vec<ProcIdentity>,
}

/// What the person granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Approved apps.
    pub apps: Vec<AppGrant>,
    /// Clipboard reading was ticked.
    pub clipboard_read: bool,
    /// Lease length in seconds.
    pub lease_s: u64,
    /// When the lease ends, on the engine's monotonic clock.
    pub deadline_ms: u64,
}

/// The takeover part of the state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Takeover {
    /// Synthetic input is granted now.
    pub on: bool,
    /// The indicator is on screen.
    pub indicator: bool,
    /// Why the takeover is off, when it was asked for.
    pub reason: Option<String>,
}

/// The whole state of one session.
#[derive(Clone, Debug)]
pub struct SessionState {
    /// The phase.
    pub phase: Phase,
    /// The phase before a pending consent (restored on deny).
    prev: Phase,
    /// The grant, while granted or expired.
    pub grant: Option<Grant>,
    /// The input mode.
    pub input: InputMode,
    /// Takeover state.
    pub takeover: Takeover,
    /// The takeover frame shown for a pending consent was lost before the grant (why): the
    /// grant then has no takeover.
    lost_before_grant: Option<String>,
    /// Set while the person has taken over; cleared only by a resume.
    pub paused: Option<PausedReason>,
    /// Token epoch: tokens issued in an older epoch are stale (bumped on every resume).
    pub epoch: u64,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            phase: Phase::Idle,
            prev: Phase::Idle,
            grant: None,
            input: InputMode::Headless,
            takeover: Takeover::default(),
            lost_before_grant: None,
            paused: None,
            epoch: 0,
        }
    }
}

/// What a call needs, for [`SessionState::check_call`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallNeeds {
    /// The tool's class.
    pub class: ToolClass,
    /// The call sends synthetic input (needs an active takeover).
    pub synthetic: bool,
}

impl SessionState {
    /// True while the lease runs.
    pub fn lease_live(&self, now_ms: u64) -> bool {
        self.phase == Phase::Granted && self.grant.as_ref().is_some_and(|g| now_ms < g.deadline_ms)
    }

    /// Whether a call may go ahead now. Session tools are judged by their handlers.
    pub fn check_call(&self, needs: CallNeeds, now_ms: u64) -> Result<(), DriverError> {
        match self.phase {
            Phase::Stopped => {
                return Err(DriverError::new(
                    ErrorCode::StoppedByPerson,
                    "the person stopped the driver",
                ));
            }
            Phase::Revoked => {
                return Err(DriverError::new(
                    ErrorCode::SessionRevoked,
                    "the host revoked this session",
                ));
            }
            _ => {}
        }
        if needs.class == ToolClass::Session {
            return Ok(());
        }
        match self.phase {
            Phase::Idle | Phase::Pending => {
                return Err(DriverError::new(
                    ErrorCode::NoSession,
                    "no session is open on this connection",
                ));
            }
            Phase::Expired => {
                return Err(DriverError::new(
                    ErrorCode::ConsentExpired,
                    "the session's lease ended",
                ));
            }
            Phase::Granted if !self.lease_live(now_ms) => {
                return Err(DriverError::new(
                    ErrorCode::ConsentExpired,
                    "the session's lease ended",
                ));
            }
            _ => {}
        }
        if needs.class == ToolClass::Act {
            if let Some(r) = self.paused {
                let mut e = DriverError::new(
                    ErrorCode::UserTookOver,
                    format!(
                        "the takeover is paused ({}); acts wait for Continue",
                        r.as_str()
                    ),
                )
                .with_effect("refused");
                e.paused_reason = Some(r.as_str().into());
                return Err(e);
            }
            if needs.synthetic && !(self.takeover.on && self.takeover.indicator) {
                return Err(DriverError::new(
                    ErrorCode::RequiresTakeover,
                    "synthetic input needs a takeover session with its indicator on screen",
                )
                .with_effect("refused"));
            }
        }
        Ok(())
    }

    /// The consent dialog goes up (start_session that needs the person).
    pub fn begin_consent(&mut self) -> Result<(), DriverError> {
        self.check_call(
            CallNeeds {
                class: ToolClass::Session,
                synthetic: false,
            },
            0,
        )?;
        if self.phase != Phase::Pending {
            self.prev = self.phase;
        }
        self.phase = Phase::Pending;
        Ok(())
    }

    /// The takeover frame is about to be shown for the pending consent: a loss from now until
    /// the grant counts against it.
    pub fn showing_indicator(&mut self) {
        self.lost_before_grant = None;
    }

    /// The person allowed. `takeover_on` is true only when the takeover line was ticked and the
    /// indicator is on screen; a frame lost since [`SessionState::showing_indicator`] turns it
    /// off.
    pub fn grant(
        &mut self,
        grant: Grant,
        mut takeover_on: bool,
        mut takeover_reason: Option<String>,
    ) {
        if self.phase != Phase::Pending {
            return;
        }
        if let Some(lost) = self.lost_before_grant.take()
            && takeover_on
        {
            takeover_on = false;
            takeover_reason = Some(lost);
        }
        self.phase = Phase::Granted;
        self.grant = Some(grant);
        self.input = if takeover_on {
            InputMode::Takeover
        } else {
            InputMode::Headless
        };
        self.takeover = Takeover {
            on: takeover_on,
            indicator: takeover_on,
            reason: takeover_reason,
        };
    }

    /// The person denied (or the dialog timed out): back to where the session was.
    pub fn deny(&mut self, now_ms: u64) {
        if self.phase != Phase::Pending {
            return;
        }
        self.phase = match self.prev {
            Phase::Granted if self.grant.as_ref().is_some_and(|g| now_ms < g.deadline_ms) => {
                Phase::Granted
            }
            Phase::Granted | Phase::Expired => Phase::Expired,
            _ => Phase::Idle,
        };
    }

    /// start_session {input: "headless"} on a live grant: the takeover ends at once, the pause
    /// stays.
    pub fn switch_headless(&mut self) {
        self.input = InputMode::Headless;
        if self.takeover.on {
            self.takeover = Takeover {
                on: false,
                indicator: false,
                reason: Some("switched_to_headless".into()),
            };
        }
    }

    fn drop_takeover(&mut self, reason: &str) {
        self.input = InputMode::Headless;
        if self.takeover.on || self.takeover.indicator {
            self.takeover = Takeover {
                on: false,
                indicator: false,
                reason: Some(reason.into()),
            };
        }
    }

    /// end_session (also the connection closing): no session, no takeover; the pause stays.
    pub fn end(&mut self) {
        if self.phase.is_terminal() {
            return;
        }
        self.phase = Phase::Idle;
        self.grant = None;
        self.drop_takeover("session_ended");
    }

    /// The lease ran out.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        if self.phase == Phase::Granted && !self.lease_live(now_ms) {
            self.phase = Phase::Expired;
            self.drop_takeover("lease_expired");
            return true;
        }
        false
    }

    /// The kill switch.
    pub fn stop(&mut self) {
        if self.phase.is_terminal() {
            return;
        }
        self.phase = Phase::Stopped;
        self.drop_takeover("stopped_by_person");
    }

    /// The host revoked the session.
    pub fn revoke(&mut self) {
        if self.phase.is_terminal() {
            return;
        }
        self.phase = Phase::Revoked;
        self.drop_takeover("session_revoked");
    }

    /// The person's own input during a takeover. Returns true when this paused the session.
    pub fn person_input(&mut self, reason: PausedReason) -> bool {
        if self.phase.is_terminal() || !self.takeover.on || self.paused.is_some() {
            return false;
        }
        self.paused = Some(reason);
        true
    }

    /// A resume from the person's Continue or the host's pipe. Returns true when it resumed.
    /// Every token issued before it becomes stale.
    pub fn resume(&mut self, by: ResumeBy) -> bool {
        if self.paused.is_none() || self.phase.is_terminal() {
            return false;
        }
        if by == ResumeBy::Indicator && !self.takeover.indicator {
            // Continue exists only on a shown indicator.
            return false;
        }
        self.paused = None;
        self.epoch += 1;
        true
    }

    /// A new takeover indicator came up for an already paused session: it shows Continue.
    pub fn indicator_lost(&mut self, reason: &str) {
        if self.phase == Phase::Pending {
            // Shown for a consent not yet granted: the grant must not count on it.
            self.lost_before_grant = Some(reason.into());
        }
        if self.takeover.on || self.takeover.indicator {
            self.drop_takeover(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ACT: CallNeeds = CallNeeds {
        class: ToolClass::Act,
        synthetic: false,
    };
    const SYNTH: CallNeeds = CallNeeds {
        class: ToolClass::Act,
        synthetic: true,
    };
    const READ: CallNeeds = CallNeeds {
        class: ToolClass::Read,
        synthetic: false,
    };

    fn grant(now: u64, lease: u64) -> Grant {
        Grant {
            apps: vec![],
            clipboard_read: false,
            lease_s: lease / 1000,
            deadline_ms: now + lease,
        }
    }

    /// Everything that can happen to a session, from every source.
    #[derive(Clone, Debug)]
    enum Op {
        Start {
            takeover: bool,
            allow: bool,
        },
        SwitchHeadless,
        End,
        Tick(u64),
        Kill,
        Revoke,
        Person(u8),
        ResumeHost,
        ResumeIndicator,
        /// A resume attempt from a source that must never resume (the model, a tool call,
        /// a new consent): the engine has no transition for it, so nothing may change.
        ResumeByModel,
        IndicatorLost,
        IssueToken,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<bool>(), any::<bool>())
                .prop_map(|(takeover, allow)| Op::Start { takeover, allow }),
            Just(Op::SwitchHeadless),
            Just(Op::End),
            (1u64..400_000).prop_map(Op::Tick),
            Just(Op::Kill),
            Just(Op::Revoke),
            (0u8..3).prop_map(Op::Person),
            Just(Op::ResumeHost),
            Just(Op::ResumeIndicator),
            Just(Op::ResumeByModel),
            Just(Op::IndicatorLost),
            Just(Op::IssueToken),
        ]
    }

    fn check_invariants(s: &SessionState, now: u64, tokens: &[u64]) {
        // Acts are never allowed while paused.
        if s.paused.is_some() {
            assert!(s.check_call(ACT, now).is_err());
            assert!(s.check_call(SYNTH, now).is_err());
        }
        // Reads still work while paused when the lease runs.
        if s.paused.is_some() && s.lease_live(now) {
            assert!(s.check_call(READ, now).is_ok());
        }
        // Synthetic input only with an active takeover and its indicator.
        if s.check_call(SYNTH, now).is_ok() {
            assert!(
                s.takeover.on && s.takeover.indicator && s.paused.is_none() && s.lease_live(now)
            );
        }
        // The indicator implies a live takeover grant.
        if s.takeover.indicator {
            assert!(s.takeover.on);
            assert!(matches!(s.phase, Phase::Granted));
        }
        // Terminal phases refuse everything but session tools.
        if s.phase.is_terminal() {
            assert!(s.check_call(READ, now).is_err());
            assert!(!s.takeover.on);
        }
        // Tokens from an older epoch are stale.
        for t in tokens {
            assert!(*t <= s.epoch);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
        #[test]
        fn random_sequences_keep_the_invariants(ops in proptest::collection::vec(op(), 1..60)) {
            let mut s = SessionState::default();
            let mut now = 1_000u64;
            let mut tokens: Vec<u64> = Vec::new();
            let mut was_terminal: Option<Phase> = None;
            for op in ops {
                let before = s.clone();
                match op {
                    Op::Start { takeover, allow } => {
                        if s.begin_consent().is_ok() {
                            if allow {
                                s.grant(grant(now, 300_000), takeover, None);
                            } else {
                                s.deny(now);
                            }
                        }
                    }
                    Op::SwitchHeadless => s.switch_headless(),
                    Op::End => s.end(),
                    Op::Tick(ms) => { now += ms; s.expire(now); }
                    Op::Kill => s.stop(),
                    Op::Revoke => s.revoke(),
                    Op::Person(r) => {
                        let r = [PausedReason::PointerMoved, PausedReason::KeyPressed, PausedReason::ButtonPressed][r as usize];
                        let paused = s.person_input(r);
                        if paused { prop_assert!(before.takeover.on); }
                    }
                    Op::ResumeHost => {
                        let resumed = s.resume(ResumeBy::Host);
                        if resumed {
                            prop_assert!(before.paused.is_some());
                            prop_assert_eq!(s.epoch, before.epoch + 1);
                        }
                    }
                    Op::ResumeIndicator => {
                        let resumed = s.resume(ResumeBy::Indicator);
                        if resumed { prop_assert!(before.takeover.indicator); }
                    }
                    Op::ResumeByModel => {}
                    Op::IndicatorLost => s.indicator_lost("indicator_unmapped"),
                    Op::IssueToken => {
                        if s.check_call(READ, now).is_ok() { tokens.push(s.epoch); }
                    }
                }
                // Only a resume from the host or the indicator clears a pause.
                if before.paused.is_some() && s.paused.is_none() {
                    prop_assert!(matches!(op, Op::ResumeHost | Op::ResumeIndicator));
                    // Every token issued before the resume is now stale.
                    for t in &tokens { prop_assert!(*t < s.epoch); }
                }
                // Terminal phases are absorbing, and nothing un-stops a stopped session.
                if let Some(p) = was_terminal { prop_assert_eq!(s.phase, p); }
                if s.phase.is_terminal() { was_terminal = Some(s.phase); }
                check_invariants(&s, now, &tokens);
            }
        }
    }

    #[test]
    fn handback_story() {
        let mut s = SessionState::default();
        s.begin_consent().unwrap();
        s.grant(grant(0, 60_000), true, None);
        assert!(s.check_call(SYNTH, 10).is_ok());
        assert!(s.person_input(PausedReason::PointerMoved));
        let e = s.check_call(ACT, 10).unwrap_err();
        assert_eq!(e.code, ErrorCode::UserTookOver);
        assert_eq!(e.effect.as_deref(), Some("refused"));
        assert!(s.check_call(READ, 10).is_ok());
        // Switching to headless ends the takeover but keeps the pause.
        s.switch_headless();
        assert!(!s.takeover.indicator);
        assert!(s.check_call(ACT, 10).is_err());
        // Continue needs a shown indicator; the host pipe does not.
        assert!(!s.resume(ResumeBy::Indicator));
        assert!(s.resume(ResumeBy::Host));
        assert_eq!(s.epoch, 1);
        assert!(s.check_call(ACT, 10).is_ok());
        assert_eq!(
            s.check_call(SYNTH, 10).unwrap_err().code,
            ErrorCode::RequiresTakeover
        );
    }

    #[test]
    fn a_frame_lost_between_its_showing_and_the_grant_leaves_no_takeover() {
        let mut s = SessionState::default();
        s.begin_consent().unwrap();
        s.showing_indicator();
        // The indicator killed, or the frame unmapped, after it said shown.
        s.indicator_lost("indicator_unmapped");
        s.grant(grant(0, 60_000), true, None);
        assert!(!s.takeover.on && !s.takeover.indicator);
        assert_eq!(s.takeover.reason.as_deref(), Some("indicator_unmapped"));
        assert_eq!(
            s.check_call(SYNTH, 10).unwrap_err().code,
            ErrorCode::RequiresTakeover
        );
        // A loss of an earlier frame, before this one was shown, does not count against it.
        s.begin_consent().unwrap();
        s.indicator_lost("indicator_destroyed");
        s.showing_indicator();
        s.grant(grant(0, 60_000), true, None);
        assert!(s.takeover.on);
    }

    #[test]
    fn lease_expiry_and_kill() {
        let mut s = SessionState::default();
        s.begin_consent().unwrap();
        s.grant(grant(0, 1_000), false, None);
        assert!(s.check_call(READ, 999).is_ok());
        assert_eq!(
            s.check_call(READ, 1_000).unwrap_err().code,
            ErrorCode::ConsentExpired
        );
        assert!(s.expire(1_000));
        s.stop();
        assert_eq!(
            s.check_call(READ, 0).unwrap_err().code,
            ErrorCode::StoppedByPerson
        );
        assert!(s.begin_consent().is_err());
    }

    #[test]
    fn deny_keeps_a_live_grant() {
        let mut s = SessionState::default();
        s.begin_consent().unwrap();
        s.grant(grant(0, 10_000), false, None);
        s.begin_consent().unwrap();
        s.deny(5);
        assert_eq!(s.phase, Phase::Granted);
        s.begin_consent().unwrap();
        s.deny(20_000);
        assert_eq!(s.phase, Phase::Expired);
    }
}
