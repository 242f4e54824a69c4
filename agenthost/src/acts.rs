//! The input agent's acts: a headless act under its one grant, a synthetic batch in a takeover
//! (checked against the engine's stop flag), and releasing what the driver holds.

use std::time::Duration;

use std::sync::Arc;

use nish_decider::backend::{FocusHold, StopFlag, SynthOp, SynthOutcome};
use nish_decider::session::PausedReason;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::State;
use nish_proto::wire::indicator::BrokerToIndicator;
use nish_proto::wire::input::{
    self, ActPath, BrokerToInput, Expect, InputFailure, InputToBroker, KeyboardFocus, PersonInput,
    SemanticOp, SynthEnd,
};
use nish_proto::wire::reader;

use crate::act_grant::act_grant;
use crate::agents::{Agent, RequestError, failure_to_error};
use crate::failures::refused_before_sending;
use crate::linux::{LinuxBackend, RELEASE_TIMEOUT, STOP_POLL};
use crate::remote::FocusCheck;
use crate::slot::CallKind;

pub(crate) async fn semantic(
    b: &LinuxBackend,
    target: Expect,
    op: SemanticOp,
) -> Result<ActPath, DriverError> {
    // The one way to the input agent: whoever starts it wires its person-input events.
    let agent = b.input().await.map_err(|e| e.with_effect("refused"))?;
    let utf16 = b
        .toolkit_of(&target.handle)
        .is_some_and(|t| nish_proto::wire::input::counts_utf16(&t));
    let grant = act_grant(&target, &op, utf16).ok_or_else(|| {
        DriverError::new(
            ErrorCode::ElementNotFound,
            "the element's handle names no object the input agent could act on",
        )
        .with_effect("refused")
    })?;
    // One act at a time: its grant is the only one (see `crate::busfilter::Grants`).
    let _one = b.act_lock.lock().await;
    b.opener.allow_pid(target.pid);
    let id = agent.next_id();
    // The input agent's links let this act's one call through from now until the answer,
    // the time bound, or the end of the session (`end_acts`), whichever comes first.
    let _grant = b.opener.grants().grant(grant);
    match agent
        .call(id, input::Semantic { target, op }, b.read_timeout)
        .await
    {
        // The path names what was done; an action's name must be there and short.
        Ok(Ok(path)) => match path.checked() {
            Some(ActPath::Action { name }) => Ok(ActPath::Action {
                name: crate::agents::clean_message(&name),
            }),
            Some(path) => Ok(path),
            None => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent reported an unknown path",
            )),
        },
        Ok(Err(InputFailure { failure, sent })) => {
            let e = failure_to_error("nish-input", &failure);
            if sent {
                if e.code.retry() != nish_proto::errors::Retry::Unsafe {
                    // Something may have reached the app: never let the model retry
                    // blindly.
                    return Err(DriverError::new(ErrorCode::AppNotResponding, e.message));
                }
                return Err(e);
            }
            Err(refused_before_sending(e))
        }
        // Not sent (the agent was gone): refused. Lost or no answer: the act may have
        // happened (app_not_responding).
        Err(e) => {
            let err = b.input.failed(&agent, e, CallKind::Act).await;
            Err(if e == RequestError::NotSent {
                err.with_effect("refused")
            } else {
                err
            })
        }
    }
}

/// A takeover is offered only when everything it needs is there: XTEST and XInput 2.1 (the
/// watcher) on the input agent's connection, and the indicator up with the stop hotkey
/// grabbed.
pub(crate) async fn takeover_available(b: &LinuxBackend) -> bool {
    if b.on_wayland() {
        // The desktop portal's RemoteDesktop and mutter's idle monitor (KWin: its idle
        // notification), and the indicator's surface (crate::remote); the stop hotkey is the
        // portal's where it has one, and `nish-driver stop` and the desktop's own
        // remote-control indicator always.
        return crate::remote::available(b.session_bus().as_deref(), &b.opener).await
            && b.indicator().await.is_ok();
    }
    let Ok(p) = b.input_probe().await else {
        return false;
    };
    if !(p.display_ok && p.xtest.is_some() && p.xinput.is_some_and(|v| v >= (2, 1))) {
        return false;
    }
    if b.indicator().await.is_err() {
        return false;
    }
    // The indicator says whether it grabbed the hotkey right after it starts.
    for _ in 0..50 {
        if let Some(g) = b.hotkey_grabbed() {
            return g;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

pub(crate) async fn takeover_baseline(b: &LinuxBackend) {
    if b.on_wayland() {
        b.remote.watch(b.session_bus()).await;
        return;
    }
    if let Err(e) = b.input_ack(input::Watch { on: true }).await {
        tracing::warn!("the input agent did not start watching: {}", e.message);
    }
}

/// Cancels a synthetic batch whose caller went away before its answer (see [`synthetic`]).
struct CancelOnDrop<'a> {
    agent: &'a Agent<BrokerToInput, InputToBroker>,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(
                id = self.id,
                "synthetic input: its caller went away; cancelled"
            );
            let _ = self.agent.queue(BrokerToInput::Cancel { id: self.id });
        }
    }
}

/// How long the check of a held field's focus, before each typed character, may take.
const FOCUS_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The check made before each character of typing held to a field on Wayland, where no display
/// says where the keyboard focus is: the field has the focused state and its window the active
/// one, as their application reports them right now (one `GetState` each, through the
/// reader). Anything else stops the typing, with one of two codes whatever went wrong:
/// `focus_changed` when the states say the focus is elsewhere (or the field is in no walk of
/// the window any more), `app_not_responding` when they could not be read in time (the reader
/// gone or restarting, the app silent). Never a code that says a retry is safe: characters may
/// have been typed before ([`focus_verdict`]).
fn focus_check(b: &LinuxBackend, hold: FocusHold) -> FocusCheck {
    let reader = b.reader.clone();
    let opener = b.opener.clone();
    let fewest: Arc<std::sync::Mutex<Option<u32>>> = Arc::default();
    Arc::new(move || {
        let (reader, opener, hold) = (reader.clone(), opener.clone(), hold.clone());
        let fewest = fewest.clone();
        Box::pin(async move {
            let asked = async {
                let r = reader.get().await?;
                opener.allow_pid(hold.window.pid);
                let call = reader::States {
                    window: hold.window,
                    handles: vec![hold.frame, hold.field],
                };
                reader
                    .call(&r, call, FOCUS_CHECK_TIMEOUT, CallKind::Read)
                    .await
            };
            let answer = match tokio::time::timeout(FOCUS_CHECK_TIMEOUT, asked).await {
                Ok(Ok(a)) => Some(a),
                Ok(Err(_)) | Err(_) => None,
            };
            let mut fewest = fewest.lock().unwrap_or_else(|e| e.into_inner());
            focus_verdict(answer, &mut fewest)
        })
    })
}

/// What the reader's answer to a focus check means (see [`focus_check`]); `None` when no
/// answer came. `fewest` is the fewest windows the application listed at the batch's checks
/// so far: one more than that is a window the app opened while the text was typed, which
/// takes the focus once the desktop shows it (before the app's states say so): the typing
/// stops there too. A check that cannot read the count stops the typing as one that cannot
/// read the states (before the first character: refused).
fn focus_verdict(
    answer: Option<Result<reader::StatesRead, nish_proto::wire::AgentFailure>>,
    fewest: &mut Option<u32>,
) -> Result<(), DriverError> {
    let opened = || {
        DriverError::new(
            ErrorCode::FocusChanged,
            "the application opened a window of its own while the text was typed; the \
             keyboard focus goes there",
        )
    };
    let moved = || {
        DriverError::new(
            ErrorCode::FocusChanged,
            "the field no longer holds the keyboard focus, or its window is no longer the \
             active one",
        )
    };
    let unread = || {
        DriverError::new(
            ErrorCode::AppNotResponding,
            "the states of the field and its window could not be read",
        )
    };
    match answer {
        Some(Ok(read)) => {
            match read.states.as_slice() {
                [Some(w), Some(f)] if w.has(State::Active) && f.has(State::Focused) => {}
                [Some(_), Some(_)] => return Err(moved()),
                _ => return Err(unread()),
            }
            match (*fewest, read.app_windows) {
                (Some(f), Some(n)) if n > f => Err(opened()),
                (_, Some(n)) => {
                    *fewest = Some(fewest.map_or(n, |f| f.min(n)));
                    Ok(())
                }
                (_, None) => Err(unread()),
            }
        }
        // The field or its window is in no walk of the window any more (a new read replaced
        // it): what the typing was judged on is gone.
        Some(Err(f)) if f.code == ErrorCode::InvalidArguments.as_str() => Err(moved()),
        Some(Err(_)) | None => Err(unread()),
    }
}

/// Whether a takeover's typing of `text` would be refused for a character before its first
/// key (Wayland: the desktop's layout, as [`crate::remote::keysyms_of`] judges it).
pub(crate) async fn typeable(b: &LinuxBackend, text: &str) -> Result<(), DriverError> {
    if !b.on_wayland() {
        return Ok(());
    }
    let layout = layout(b).await;
    let op = SynthOp::Type { text: text.into() };
    crate::remote::keysyms_of(&op, layout.as_ref()).map(|_| ())
}

/// The keyboard layout the compositor gives keys by ([`crate::keymap`]), read anew for each
/// batch (the person may switch layouts); `None` when it cannot be read: the keys then go as
/// their own keysyms, and one the compositor drops stops the batch.
async fn layout(b: &LinuxBackend) -> Option<crate::keymap::Layout> {
    let opener = b.opener.clone();
    let read = tokio::task::spawn_blocking(move || {
        let stream = opener.wayland_stream().map_err(|f| f.message)?;
        crate::keymap::read(stream)
    });
    // The wait for the keymap bounds itself; this bounds the connection too (the engine counts
    // it in the batch's time bound).
    match tokio::time::timeout(nish_decider::backend::LAYOUT_READ, read).await {
        Ok(Ok(Ok(layout))) => Some(layout),
        Ok(Ok(Err(why))) => {
            tracing::warn!("the keyboard layout could not be read ({why}); typing goes without it");
            None
        }
        Ok(Err(_)) | Err(_) => None,
    }
}

/// [`synthetic`] of typing held to one field (see [`focus_check`]); on X11 the input agent
/// asks the display before each character, as for any typing.
pub(crate) async fn synthetic_held(
    b: &LinuxBackend,
    op: SynthOp,
    hold: FocusHold,
    stop: StopFlag,
) -> Result<SynthOutcome, DriverError> {
    if b.on_wayland() {
        let check = focus_check(b, hold);
        let layout = layout(b).await;
        return b.remote.synthetic(op, stop, Some(check), layout).await;
    }
    synthetic(b, op, hold.window.window_id, stop).await
}

/// A click on Wayland, where the takeover's session has the pointer (KWin: `remote::click`):
/// the window as the reader lists it now (its pid, title and size identify it to KWin),
/// the indicator told of the driver's press first, as on X11.
async fn wayland_click(
    b: &LinuxBackend,
    window_id: u64,
    at: (i32, i32),
    button: u8,
    count: u8,
    stop: StopFlag,
) -> Result<SynthOutcome, DriverError> {
    let windows = crate::reads::list_windows(b)
        .await
        .map_err(|e| e.with_effect("refused"))?;
    let Some(target) = windows.into_iter().find(|w| w.window_id == window_id) else {
        return Err(DriverError::new(
            ErrorCode::WindowTargetNotFound,
            "the window is no longer listed; nothing was sent",
        )
        .with_effect("refused"));
    };
    // The indicator hears of each press right before it goes, after its checks (a click
    // refused or stopped before a press quiets nothing).
    let ind = b.indicator.current().await;
    let announce: crate::remote::Announce = std::sync::Arc::new(move || {
        let ind = ind.clone();
        Box::pin(async move {
            if let Some(ind) = ind {
                let _ = ind.send(BrokerToIndicator::DriverPress).await;
            }
        })
    });
    // On mutter the click goes into the window that has the focus only: checked again once
    // its stream runs and before each press.
    let focused = b
        .remote
        .clicks_need_focus()
        .then(|| focused_check(b, window_id));
    b.remote
        .click(
            crate::remote::Click {
                target,
                at,
                button,
                count,
            },
            stop,
            focused,
            announce,
        )
        .await
}

/// The check a click on mutter makes once its stream runs and before each press: the window
/// is still the only one on the accessibility bus that says it is active (the engine's rule
/// before the click), as the reader lists the windows now. Else `occluded` (the focus moved),
/// or `app_not_responding` when the list could not be read within [`FOCUS_CHECK_TIMEOUT`].
fn focused_check(b: &LinuxBackend, window_id: u64) -> FocusCheck {
    let reader = b.reader.clone();
    Arc::new(move || {
        let reader = reader.clone();
        Box::pin(async move {
            let listed = async {
                let r = reader.get().await?;
                reader
                    .call(&r, reader::ListWindows, FOCUS_CHECK_TIMEOUT, CallKind::Read)
                    .await
            };
            match tokio::time::timeout(FOCUS_CHECK_TIMEOUT, listed).await {
                Ok(Ok(Ok(windows))) => {
                    let mut active = windows.iter().filter(|w| w.active);
                    match (active.next(), active.next()) {
                        (Some(w), None) if w.window_id == window_id => Ok(()),
                        _ => Err(DriverError::new(
                            ErrorCode::Occluded,
                            "the window no longer has the keyboard focus",
                        )),
                    }
                }
                _ => Err(DriverError::new(
                    ErrorCode::AppNotResponding,
                    "the windows' states could not be read",
                )),
            }
        })
    })
}

pub(crate) async fn synthetic(
    b: &LinuxBackend,
    op: SynthOp,
    window_id: u64,
    stop: StopFlag,
) -> Result<SynthOutcome, DriverError> {
    if b.on_wayland() {
        if let SynthOp::Click {
            x,
            y,
            button,
            count,
        } = op
        {
            return wayland_click(b, window_id, (x, y), button, count, stop).await;
        }
        let layout = layout(b).await;
        return b.remote.synthetic(op, stop, None, layout).await;
    }
    let agent = b.input().await.map_err(|e| e.with_effect("refused"))?;
    if op.presses_a_button()
        && let Some(ind) = b.indicator.current().await
    {
        // The indicator ignores clicks for 1.5 s after a driver press (its controls take
        // only real devices anyway; this is the second rule).
        let _ = ind.send(BrokerToIndicator::DriverPress).await;
    }
    let id = agent.next_id();
    let kind = op.kind();
    // The engine's time bound may drop this call: the agent then stops before its next key,
    // press or move, and releases what it holds, instead of typing on after the host was
    // answered.
    let mut cancel = CancelOnDrop {
        agent: &agent,
        id,
        armed: true,
    };
    let request = agent.call(
        id,
        input::Synthetic { window_id, op },
        Duration::from_secs(60),
    );
    tokio::pin!(request);
    let mut cancelled = false;
    let answer = loop {
        tokio::select! {
            a = &mut request => {
                cancel.armed = false;
                break a;
            }
            _ = tokio::time::sleep(STOP_POLL), if !cancelled => {
                if stop.is_raised() {
                    cancelled = true;
                    let _ = agent.send(BrokerToInput::Cancel { id }).await;
                }
            }
        }
    };
    match answer {
        Ok(Ok(end)) => Ok(match end {
            SynthEnd::Done => SynthOutcome::Done,
            SynthEnd::Stopped { reason, typed } => SynthOutcome::Stopped {
                reason: match reason {
                    PersonInput::PointerMoved => PausedReason::PointerMoved,
                    PersonInput::KeyPressed => PausedReason::KeyPressed,
                    PersonInput::ButtonPressed => PausedReason::ButtonPressed,
                },
                typed,
            },
            SynthEnd::Cancelled { typed } => SynthOutcome::Cancelled { typed },
            SynthEnd::Broke { failure, typed } => {
                // Part of the act was sent, then a check refused the next step.
                let mut e = failure_to_error("nish-input", &failure);
                if e.code.retry() == nish_proto::errors::Retry::Safe
                    || e.code.retry() == nish_proto::errors::Retry::Never
                {
                    e = DriverError::new(ErrorCode::InternalError, e.message.clone());
                }
                e.effect = Some("stopped".into());
                e.typed_characters = Some(typed);
                return Err(e);
            }
        }),
        Ok(Err(InputFailure { failure, .. })) => {
            // Refused before anything was sent.
            let e = failure_to_error("nish-input", &failure);
            Err(if e.code == ErrorCode::FocusChanged {
                // Nothing was typed: the focus was elsewhere before the first key. The
                // table's focus_changed says something may have happened (unsafe); the
                // remedy is occluded's (read again, bring the window to the front).
                DriverError::new(
                    ErrorCode::Occluded,
                    format!("{}; nothing was sent", e.message),
                )
                .with_effect("refused")
            } else {
                refused_before_sending(e)
            })
        }
        Err(e) => {
            let err = b.input.failed(&agent, e, CallKind::Act).await;
            tracing::warn!(op = kind, "synthetic act lost: {}", err.message);
            Err(if e == RequestError::NotSent {
                err.with_effect("refused")
            } else {
                err
            })
        }
    }
}

/// Where the X input focus is, asked of the input agent; `None` on Wayland (no X, no keys).
pub(crate) async fn keyboard_focus(b: &LinuxBackend) -> Result<Option<KeyboardFocus>, DriverError> {
    if crate::desktop::session_type().0 == "wayland" {
        return Ok(None);
    }
    let agent = b.input().await?;
    let focus = b
        .input
        .call(&agent, input::Focus, RELEASE_TIMEOUT, CallKind::Read)
        .await?
        .map_err(|f| failure_to_error("nish-input", &f.failure))?;
    Ok(Some(KeyboardFocus {
        chain: focus
            .chain
            .into_iter()
            .take(KeyboardFocus::MAX_CHAIN)
            .collect(),
        popup: focus.popup,
    }))
}

pub(crate) async fn release_all(b: &LinuxBackend) {
    if b.on_wayland() {
        b.remote.release_all().await;
        return;
    }
    if b.input.current().await.is_none() {
        return;
    }
    if let Err(e) = b.input_ack(input::ReleaseAll).await {
        tracing::warn!("release of held input not confirmed: {}", e.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::errors::Retry;
    use nish_proto::model::StateSet;
    use nish_proto::wire::AgentFailure;

    fn set(states: &[State]) -> Option<StateSet> {
        let mut s = StateSet::default();
        for st in states {
            s.insert(*st);
        }
        Some(s)
    }

    fn read(states: Vec<Option<StateSet>>, app_windows: Option<u32>) -> reader::StatesRead {
        reader::StatesRead {
            states,
            app_windows,
        }
    }

    fn focused(app_windows: Option<u32>) -> reader::StatesRead {
        read(
            vec![set(&[State::Active]), set(&[State::Focused])],
            app_windows,
        )
    }

    #[test]
    fn a_focus_check_goes_on_only_for_a_focused_field_in_an_active_window() {
        assert!(focus_verdict(Some(Ok(focused(Some(1)))), &mut None).is_ok());
        for states in [
            vec![set(&[]), set(&[State::Focused])],
            vec![set(&[State::Active]), set(&[])],
        ] {
            let e = focus_verdict(Some(Ok(read(states, Some(1)))), &mut None).unwrap_err();
            assert_eq!(e.code, ErrorCode::FocusChanged);
        }
    }

    #[test]
    fn a_window_the_app_opens_stops_the_typing_before_its_focus_shows() {
        let mut fewest = None;
        assert!(focus_verdict(Some(Ok(focused(Some(2)))), &mut fewest).is_ok());
        assert_eq!(fewest, Some(2));
        // A window closed: fewer is the new least.
        assert!(focus_verdict(Some(Ok(focused(Some(1)))), &mut fewest).is_ok());
        assert_eq!(fewest, Some(1));
        // One opened (back to two): the field still says it has the focus, the typing stops.
        let e = focus_verdict(Some(Ok(focused(Some(2)))), &mut fewest).unwrap_err();
        assert_eq!(e.code, ErrorCode::FocusChanged);
        // Not read, at the first check or a later one: stopped as unread.
        let e = focus_verdict(Some(Ok(focused(None))), &mut fewest).unwrap_err();
        assert_eq!(e.code, ErrorCode::AppNotResponding);
        let mut never = None;
        let e = focus_verdict(Some(Ok(focused(None))), &mut never).unwrap_err();
        assert_eq!(e.code, ErrorCode::AppNotResponding);
        assert_eq!(never, None);
    }

    #[test]
    fn a_focus_check_that_fails_never_answers_a_safe_retry() {
        let failure = |code: &str| AgentFailure {
            code: code.into(),
            message: String::new(),
        };
        let cases = [
            None,
            Some(Ok(read(vec![], Some(1)))),
            Some(Ok(read(vec![set(&[State::Active]), None], Some(1)))),
            Some(Err(failure("rate_limited"))),
            Some(Err(failure("backend_unavailable"))),
            Some(Err(failure("app_not_responding"))),
            Some(Err(failure("invalid_arguments"))),
        ];
        for c in cases {
            let e = focus_verdict(c, &mut Some(1)).unwrap_err();
            assert!(
                matches!(
                    e.code,
                    ErrorCode::FocusChanged | ErrorCode::AppNotResponding
                ),
                "{:?}",
                e.code
            );
            assert_eq!(e.code.retry(), Retry::Unsafe);
        }
    }
}
