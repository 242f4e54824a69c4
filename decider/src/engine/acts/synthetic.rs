//! Synthetic acts (takeover only): XTEST through the input agent, each point hit-tested
//! against the windows above it, focus checked after a focusing click.

use super::*;
use crate::backend::{ACTING_KEY_SETTLE, FocusHold, FrameOrigin, LAYOUT_READ, acting_char};
use std::time::Duration;

/// How long a focusing click may take to give the target the keyboard focus.
const FOCUS_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A type_text failure after its focusing click was sent: the act has partly happened, so no
/// failure says nothing happened. A failure that says so (the typing refused before its first
/// key, a re-read that failed, the person's input, a window out of scope) answers with
/// `effect: "stopped"`, no character typed, and says the click went; a code a host may simply
/// retry becomes an `unsafe` one. A failure already `stopped` (the typing itself stopped part
/// way) stays as it is.
fn after_focusing_click(e: DriverError) -> DriverError {
    use nish_proto::errors::Retry;
    if e.effect.as_deref() == Some("stopped") {
        return e;
    }
    let code = match e.code {
        // The focus left the field between the click and the first key.
        ErrorCode::Occluded => ErrorCode::FocusChanged,
        c if matches!(c.retry(), Retry::Safe | Retry::AfterRefresh) => ErrorCode::AppNotResponding,
        c => c,
    };
    let said = e
        .message
        .replace("; nothing was sent", "")
        .replace(", nothing was sent", "");
    let mut out = DriverError::new(code, format!("{said}; the focusing click was sent"))
        .with_effect("stopped");
    out.typed_characters = Some(0);
    out.paused_reason = e.paused_reason;
    out
}

/// A click refused because its window does not have the keyboard focus, on a desktop whose
/// clicks go only into that window (GNOME).
fn not_focused_window() -> DriverError {
    DriverError::new(
        ErrorCode::Occluded,
        "on this desktop the driver clicks only in the window that has the keyboard focus, and \
         this window does not have it (the person can click it); nothing was sent",
    )
    .with_effect("refused")
}

/// The window's own row is missing from a read that a typing on Wayland holds to.
fn missing_frame_row() -> DriverError {
    DriverError::new(
        ErrorCode::InternalError,
        "the window's own row is missing from its read; nothing was sent",
    )
    .with_effect("refused")
}

/// `t`'s row in a new read of its window, when it still has the role it had.
fn same_row<'a>(tree: &'a Tree, t: &Target) -> Option<&'a Node> {
    tree.nodes
        .get(t.row as usize)
        .filter(|n| n.role == t.node.role)
}

/// What a host approval of keys is about: the focused window, the focused rows of its fresh
/// read (the keys go there), and its default buttons when the keys are an Enter.
fn keys_subject<'a>(read: &'a Snapshot, keys: &[String]) -> ActSubject<'a> {
    let nodes = &read.tree.nodes;
    let rows = |r: Vec<u32>| {
        r.into_iter()
            .map(|r| &nodes[r as usize])
            .collect::<Vec<_>>()
    };
    let enter = crate::approvals::key_kind(keys) == crate::approvals::KeyKind::Enter;
    ActSubject {
        window_id: read.tree.window.window_id,
        pid: read.tree.window.pid,
        named: None,
        pointed: Under::NoPoint,
        focus: Some(rows(reach::focused(nodes))),
        defaults: if enter {
            rows(reach::defaults(nodes))
        } else {
            vec![]
        },
    }
}

/// The topmost visible window at a screen point.
fn topmost_at(all: &[WindowInfo], x: i32, y: i32) -> Option<&WindowInfo> {
    all.iter()
        .filter(|w| w.visible && w.frame.contains_point(x, y))
        .max_by_key(|w| w.stacking)
}

/// The time a batch takes at its pace, beyond the engine's bound: typing at most
/// [`PACE_PER_KEY`] a character (the slowest backend's: about 25 ms on Wayland, with a check of
/// the person's input before every key event and of the field's focus before every character;
/// 6 ms on X11) and [`ACTING_KEY_SETTLE`] more for each Return or Tab, keys the same for each
/// key of a combination, a glide its duration; typing and keys [`LAYOUT_READ`] more for the
/// look at the keyboard layout first.
pub(crate) fn paced(op: &SynthOp) -> Duration {
    let n = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let keys = |count: usize| PACE_PER_KEY.saturating_mul(n(count));
    match op {
        SynthOp::Type { text } => keys(text.chars().count())
            .saturating_add(
                ACTING_KEY_SETTLE
                    .saturating_mul(n(text.chars().filter(|c| acting_char(*c)).count())),
            )
            .saturating_add(LAYOUT_READ),
        SynthOp::Keys { keys: k } => {
            keys(k.iter().map(|c| c.split('+').count()).sum()).saturating_add(LAYOUT_READ)
        }
        SynthOp::Move { duration_ms, .. } => Duration::from_millis(*duration_ms),
        _ => Duration::ZERO,
    }
}

/// The most one key event of a batch is given (see [`paced`]).
pub(crate) const PACE_PER_KEY: Duration = Duration::from_millis(30);

impl<B: Backend> Engine<B> {
    /// Runs one synthetic batch for `window`, after judging the session once more right before
    /// it; typing that must go to one field names it in `hold` (checked before every character
    /// where the backend has no display to ask: [`Backend::synthetic_held`]).
    async fn send_synthetic(
        &self,
        s: &Session,
        call: &Call,
        window: &WindowInfo,
        op: SynthOp,
        hold: Option<FocusHold>,
    ) -> Result<(), DriverError> {
        self.rejudge(s, call)?;
        // Withdrawn by the host: nothing more is sent (a batch already sent is not undone).
        super::super::withdraw::check()?;
        // The spot's rules (acts::spot): a single left click sets it once done, unless the act
        // generation moved meanwhile (another act, a pause or a resume); plain typing keeps it.
        let pending = self.last_spot.batch_begins(
            &op,
            window.window_id,
            self.act_generation
                .load(std::sync::atomic::Ordering::SeqCst),
        );
        let stop = s.core().stop.clone();
        // The engine's bound is for a call that hangs; a long text takes its pace on top.
        let bound = self.cfg.backend_timeout + paced(&op);
        let batch = async {
            match hold {
                Some(hold) => self.backend.synthetic_held(op, hold, stop).await,
                None => self.backend.synthetic(op, window.window_id, stop).await,
            }
        };
        let outcome = match tokio::time::timeout(bound, batch).await {
            Ok(r) => r?,
            // Dropped: the backend stops the batch before its next key, press or move and
            // releases what it holds; part of it may have been sent.
            Err(_) => {
                return Err(DriverError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the synthetic input took longer than {} ms and was stopped; part of it \
                         may have been sent: read the window again before acting",
                        bound.as_millis()
                    ),
                )
                .with_effect("stopped"));
            }
        };
        match outcome {
            SynthOutcome::Done => {
                self.last_spot.batch_done(
                    pending,
                    self.act_generation
                        .load(std::sync::atomic::Ordering::SeqCst),
                );
                Ok(())
            }
            SynthOutcome::Stopped { reason, typed } => {
                self.pause(s, reason).await;
                let mut e = DriverError::new(
                    ErrorCode::UserTookOver,
                    format!(
                        "the person took control ({}); nothing more was sent",
                        reason.as_str()
                    ),
                )
                .with_effect("stopped");
                e.paused_reason = Some(reason.as_str().into());
                e.typed_characters = Some(typed);
                Err(e)
            }
            SynthOutcome::Cancelled { typed } => {
                let mut e = self.rejudge(s, call).err().unwrap_or_else(|| {
                    DriverError::new(ErrorCode::Timeout, "the synthetic input was cancelled")
                });
                e.effect = Some("stopped".into());
                e.typed_characters = Some(typed);
                Err(e)
            }
        }
    }

    /// After a focusing click: light reads until the target row has the focused state (at most
    /// [`FOCUS_WAIT`]); keys typed before the app handled the click would land elsewhere.
    async fn wait_focused(&self, t: &Target) -> Result<(), DriverError> {
        let start = Instant::now();
        loop {
            let tree = self.light_reread(t).await?;
            let focused = same_row(&tree, t).is_some_and(|n| n.states.has(State::Focused));
            if focused {
                return Ok(());
            }
            if start.elapsed() >= FOCUS_WAIT {
                let mut e = DriverError::new(
                    ErrorCode::FocusChanged,
                    format!(
                        "element {} did not take the keyboard focus after the click",
                        t.row
                    ),
                )
                .with_effect("stopped");
                e.typed_characters = Some(0);
                return Err(e);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// True when a takeover `type_text` into `t` needs no focusing click: the driver's last
    /// single left click put the pointer down inside this field of that window and the spot
    /// was kept since (only typing with no Return or Tab, or `set_value`, went since:
    /// [`SpotKeeper`]; so the field got the focus from that click, with no selection made by a
    /// keyboard focus), the window holds the display's keyboard focus with no popup of its
    /// application open, and a fresh read, not cut short, shows the field as the one focused
    /// row. False whenever any of it cannot be told: the field is then clicked, apart from the
    /// spot ([`SpotKeeper::press_point`]).
    async fn types_without_click(&self, t: &Target) -> bool {
        let Some(frame) = t.node.frame else {
            return false;
        };
        if !self.last_spot.kept_in(t.window.window_id, frame) {
            return false;
        }
        let Ok(Some(focus)) = self
            .bounded_read(
                "asking where the keyboard focus is",
                self.backend.keyboard_focus(),
            )
            .await
        else {
            return false;
        };
        let in_window = focus
            .chain
            .iter()
            .take(nish_proto::wire::input::KeyboardFocus::MAX_CHAIN)
            .any(|id| *id == t.window.window_id);
        if focus.popup || !in_window {
            return false;
        }
        let Ok(tree) = self.light_reread(t).await else {
            return false;
        };
        tree.truncated.is_none()
            && same_row(&tree, t).is_some()
            && reach::focused(&tree.nodes) == [t.row]
    }

    /// Where a pointer act on `t` goes: its centre, judged there; for a left click (a single
    /// or double click, or typing's focusing click) moved away from the driver's last left
    /// press when that was near ([`SpotKeeper::press_point`]), so that two presses are never
    /// one double click to the app.
    fn press_point(&self, t: &Target, call: &Call) -> Result<(i32, i32), DriverError> {
        let center = t.center()?;
        if !matches!(
            call,
            Call::Click(_) | Call::DoubleClick(_) | Call::TypeText { .. }
        ) {
            return Ok(center);
        }
        let Some(frame) = t.node.frame else {
            return Ok(center);
        };
        Ok(self
            .last_spot
            .press_point(t.window.window_id, frame, t.window.frame, center))
    }

    /// A light read of `t`'s window (no details: states and roles), bounded and checked.
    async fn light_reread(&self, t: &Target) -> Result<Tree, DriverError> {
        let light = WalkLimits {
            details: false,
            ..WalkLimits::default()
        };
        let tree = self
            .bounded(
                "re-reading the window",
                self.backend.read_tree(&t.window, light),
            )
            .await?;
        self.validate_tree(tree, &t.window)
    }

    /// Refuses a pointer act whose point another window covers.
    async fn hit_test(&self, window: &WindowInfo, x: i32, y: i32) -> Result<(), DriverError> {
        let all = self
            .bounded_read("listing windows", self.backend.list_windows())
            .await?;
        match topmost_at(&all, x, y) {
            Some(top) if top.window_id == window.window_id => Ok(()),
            Some(top) => Err(DriverError::new(
                ErrorCode::Occluded,
                format!("window {} covers the target at {x},{y}", top.window_id),
            )),
            None => Err(DriverError::new(
                ErrorCode::Occluded,
                format!("no window at {x},{y}"),
            )),
        }
    }

    /// Refuses a click outside the window that has the keyboard focus where clicks go only
    /// there ([`crate::backend::Backend::clicks_need_focus`]).
    async fn in_focused_window(
        &self,
        j: &Judgement,
        window: &WindowInfo,
    ) -> Result<(), DriverError> {
        let (w, _) = self.keyboard_window(j).await?;
        if w.window_id == window.window_id {
            Ok(())
        } else {
            Err(not_focused_window())
        }
    }

    /// The window that holds the keyboard focus, in the judgement's scope, and whether a popup
    /// of its application is open: the window the X server sends keys to, as the backend reads
    /// it (not the window manager's active window, which any client can name), found in the
    /// window list as the focus window or its nearest listed ancestor.
    async fn keyboard_window(&self, j: &Judgement) -> Result<(WindowInfo, bool), DriverError> {
        let all = self
            .bounded_read("listing windows", self.backend.list_windows())
            .await?;
        let focus = self
            .bounded_read(
                "asking where the keyboard focus is",
                self.backend.keyboard_focus(),
            )
            .await?;
        let (w, popup) = match focus {
            Some(f) => (
                f.chain
                    .iter()
                    .take(nish_proto::wire::input::KeyboardFocus::MAX_CHAIN)
                    .find_map(|id| all.iter().find(|w| w.window_id == *id))
                    .cloned(),
                f.popup,
            ),
            None => {
                // No display to ask (Wayland): the windows' own `active` states, which an app
                // reports about itself; trusted only when exactly one window claims it.
                let mut active = all.into_iter().filter(|w| w.active);
                match (active.next(), active.next()) {
                    (Some(w), None) => (Some(w), false),
                    _ => (None, false),
                }
            }
        };
        let Some(w) = w else {
            // Nothing was sent: focus_changed (unsafe) would say something may have happened.
            // The remedy is occluded's: read again, bring the window to the front.
            return Err(DriverError::new(
                ErrorCode::Occluded,
                "no window has the keyboard focus; nothing was sent",
            )
            .with_effect("refused"));
        };
        j.admit(&self.window_fact(Reach::Focus(w.window_id), w.pid))?;
        Ok((w, popup))
    }

    pub(super) async fn synthetic_act(
        self: &Arc<Self>,
        s: &Arc<Session>,
        call: &Call,
        j: &Judgement,
    ) -> ToolResult {
        let started = Instant::now();
        let tool = call.tool().name();
        let done = |path: &str, window_id: u64| {
            json!({"ok": true, "effect": "dispatched", "verified": false, "path": path,
                   "took_cursor": true, "escalation": null, "diff": null, "snapshot_id": null,
                   "settle": {"ms": started.elapsed().as_millis() as u64, "settled": true},
                   "window_id": window_id})
        };
        // On Wayland no pointer input but clicks where the takeover can click (KWin, which
        // tells where a window is): the rest is refused here, before any approval is asked
        // for an act that could not happen.
        let clicks = matches!(
            call,
            Call::Click(_) | Call::DoubleClick(_) | Call::RightClick(_)
        );
        if self.backend.frame_origin() == FrameOrigin::Window
            && !(clicks && self.backend.wayland_pointer())
            && matches!(
                call,
                Call::Click(_)
                    | Call::DoubleClick(_)
                    | Call::RightClick(_)
                    | Call::Scroll { .. }
                    | Call::Drag { .. }
                    | Call::MoveCursor { .. }
                    | Call::BringToFront(_)
            )
        {
            return Err(DriverError::new(
                ErrorCode::Unsupported,
                "on Wayland the driver sends no pointer input but clicks in a takeover on KDE \
                 and GNOME (elsewhere a window's place on the screen is not known); nothing \
                 was sent",
            )
            .with_effect("refused"));
        }
        match call {
            Call::Click(PointerArgs { token, .. })
            | Call::DoubleClick(PointerArgs { token, .. })
            | Call::RightClick(PointerArgs { token, .. })
            | Call::TypeText { token, .. }
            | Call::Scroll { token, .. } => {
                // Judged on what lies under the point in this fresh read, not on the element
                // named: a container whose centre lies on a button clicks the button.
                let t = self.synth_target(s, token, j).await?;
                let (x, y) = self.press_point(&t, call)?;
                j.apply(&self.target_facts_at(s, &t, call, x, y))?;
                // Where clicks go only into the focused window, a click (or a typing's
                // focusing click) elsewhere is refused before the person is asked (and checked
                // again after).
                let focus_first = (clicks || matches!(call, Call::TypeText { .. }))
                    && self.backend.frame_origin() == FrameOrigin::Window
                    && self.backend.clicks_need_focus();
                if focus_first {
                    self.in_focused_window(j, &t.window).await?;
                }
                let approval = self.approve_act(s, call, &t.subject_at(call, x, y)).await?;
                let (t, x, y) = match approval.digest {
                    None => (t, x, y),
                    Some(digest) => {
                        let t = self.synth_target(s, token, j).await?;
                        let (x, y) = self.press_point(&t, call)?;
                        j.apply(&self.target_facts_at(s, &t, call, x, y))?;
                        self.check_approved(Some(&digest), call, &t.subject_at(call, x, y))?;
                        (t, x, y)
                    }
                };
                // On Wayland the backend judges a click's point where the compositor tells
                // where windows are (KWin), and refuses every other pointer act before
                // anything is sent: there is no display to hit-test here.
                let wayland = self.backend.frame_origin() == FrameOrigin::Window;
                if !wayland {
                    self.hit_test(&t.window, x, y).await?;
                } else if clicks && self.backend.clicks_need_focus() {
                    self.in_focused_window(j, &t.window).await?;
                }
                // The act's `path`: through the portal on Wayland, XTEST on X11.
                let via = |act: &str| format!("{}:{act}", if wayland { "portal" } else { "xtest" });
                let click = |button, count| SynthOp::Click {
                    x,
                    y,
                    button,
                    count,
                };
                let mut focusing_click = false;
                let (op, verify, path) = match call {
                    Call::Click(_) => (
                        click(1, 1),
                        if is_checkable(&t.node) {
                            Verify::Toggle {
                                was: checked(&t.node),
                            }
                        } else if SELECTABLE_ROLES.contains(&t.node.role.as_str()) {
                            Verify::Selected
                        } else {
                            Verify::None
                        },
                        via("click"),
                    ),
                    Call::DoubleClick(_) => (click(1, 2), Verify::None, via("double_click")),
                    Call::RightClick(_) => (click(3, 1), Verify::None, via("right_click")),
                    Call::Scroll {
                        direction, amount, ..
                    } => (
                        SynthOp::Scroll {
                            x,
                            y,
                            direction: direction.as_str().into(),
                            amount: *amount,
                        },
                        Verify::None,
                        "xtest:scroll".to_string(),
                    ),
                    Call::TypeText { text, .. } if wayland => {
                        // The keys go only into a field that holds the keyboard focus, in the
                        // window the desktop gives the keys. A field without it gets a
                        // focusing click where the compositor tells where windows are (KWin),
                        // judged there as any click; elsewhere (mutter) the typing is refused
                        // before anything is sent.
                        let (w, _) = self.keyboard_window(j).await?;
                        if w.window_id != t.window.window_id || !t.node.states.has(State::Focused) {
                            if !self.backend.wayland_pointer() {
                                return Err(DriverError::new(
                                    ErrorCode::Unsupported,
                                    "on this Wayland desktop the driver cannot click a field to \
                                     focus it, and this field does not hold the keyboard focus; \
                                     nothing was sent",
                                )
                                .with_effect("refused"));
                            }
                            if self.backend.clicks_need_focus() && w.window_id != t.window.window_id
                            {
                                return Err(not_focused_window());
                            }
                            // What the typing itself would refuse is refused before the click.
                            if t.before.is_empty() {
                                return Err(missing_frame_row());
                            }
                            self.backend.typeable(text).await?;
                            self.send_synthetic(s, call, &t.window, click(1, 1), None)
                                .await?;
                            focusing_click = true;
                            self.wait_focused(&t).await.map_err(after_focusing_click)?;
                            let (w, _) = self
                                .keyboard_window(j)
                                .await
                                .map_err(after_focusing_click)?;
                            if w.window_id != t.window.window_id {
                                let mut e = DriverError::new(
                                    ErrorCode::FocusChanged,
                                    "the desktop gives the keys to another window after the \
                                     focusing click",
                                )
                                .with_effect("stopped");
                                e.typed_characters = Some(0);
                                return Err(after_focusing_click(e));
                            }
                        }
                        let before = t.node.value.clone().unwrap_or_default();
                        (
                            SynthOp::Type { text: text.clone() },
                            Verify::Insert {
                                before,
                                text: text.clone(),
                            },
                            "portal:type".to_string(),
                        )
                    }
                    Call::TypeText { text, .. } => {
                        // The field is focused with a click, and the keys wait until the field
                        // itself says it has the focus (the app handles the click before the
                        // keys). Not when the driver's last click was at this very spot and
                        // the field still holds the focus (`types_without_click`): the text
                        // goes at its caret. A second click there was taken by GTK 3 for a
                        // double click when its timer for that ran late, and it selected a
                        // word or moved the caret after the first keys (measured: 15 of 30
                        // pairs of typing into one field went wrong).
                        if !self.types_without_click(&t).await {
                            self.send_synthetic(s, call, &t.window, click(1, 1), None)
                                .await?;
                            focusing_click = true;
                            self.wait_focused(&t).await.map_err(after_focusing_click)?;
                        }
                        let before = t.node.value.clone().unwrap_or_default();
                        (
                            SynthOp::Type { text: text.clone() },
                            Verify::Insert {
                                before,
                                text: text.clone(),
                            },
                            "xtest:type".to_string(),
                        )
                    }
                    _ => unreachable!("matched above"),
                };
                // On Wayland the typing is held to the field: it stops once the field or its
                // window loses the focus (on X11 the input agent asks the display before each
                // character).
                let hold = match (
                    wayland && matches!(call, Call::TypeText { .. }),
                    t.before.first(),
                ) {
                    (false, _) => None,
                    (true, Some(frame)) => Some(FocusHold {
                        window: t.window.clone(),
                        frame: frame.handle.clone(),
                        field: t.node.handle.clone(),
                    }),
                    (true, None) => {
                        let e = missing_frame_row();
                        return Err(if focusing_click {
                            after_focusing_click(e)
                        } else {
                            e
                        });
                    }
                };
                let sent = self.send_synthetic(s, call, &t.window, op, hold).await;
                if focusing_click {
                    sent.map_err(after_focusing_click)?;
                } else {
                    sent?;
                }
                let ms = started.elapsed().as_millis() as u64;
                Box::pin(self.finish_act(
                    s,
                    call,
                    &t,
                    verify,
                    approval.effect,
                    path,
                    true,
                    call.text_len(),
                    ms,
                    None,
                    j,
                ))
                .await
            }
            Call::Drag { from, to, .. } => {
                // Judged on what it drops on, under the drop point in a fresh read: a field
                // takes the dragged text (typing).
                let (from_token, to_token) = (from, to);
                let mut from = self.synth_target(s, from_token, j).await?;
                let mut to = self.synth_target(s, to_token, j).await?;
                if from.window.window_id != to.window.window_id {
                    return Err(DriverError::new(
                        ErrorCode::InvalidArguments,
                        "drag works within one window",
                    ));
                }
                j.apply(&self.target_facts(s, &from, Some(&to)))?;
                let mut a = from.center()?;
                let mut b = to.center()?;
                let approval = self
                    .approve_act(s, call, &to.subject_at(call, b.0, b.1))
                    .await?;
                if let Some(digest) = approval.digest {
                    from = self.synth_target(s, from_token, j).await?;
                    to = self.synth_target(s, to_token, j).await?;
                    j.apply(&self.target_facts(s, &from, Some(&to)))?;
                    a = from.center()?;
                    b = to.center()?;
                    self.check_approved(Some(&digest), call, &to.subject_at(call, b.0, b.1))?;
                }
                if from.window.window_id != to.window.window_id {
                    return Err(DriverError::new(
                        ErrorCode::InvalidArguments,
                        "drag works within one window",
                    ));
                }
                self.hit_test(&from.window, a.0, a.1).await?;
                self.hit_test(&from.window, b.0, b.1).await?;
                self.send_synthetic(
                    s,
                    call,
                    &from.window,
                    SynthOp::Drag { from: a, to: b },
                    None,
                )
                .await?;
                let ms = started.elapsed().as_millis() as u64;
                Box::pin(self.finish_act(
                    s,
                    call,
                    &from,
                    Verify::None,
                    approval.effect,
                    "xtest:drag".into(),
                    true,
                    None,
                    ms,
                    None,
                    j,
                ))
                .await
            }
            Call::PressKey { .. } | Call::Hotkey { .. } => {
                // The keys were checked by the judge. Judged on the focused element of a fresh
                // read of the window holding the keyboard focus: an activating key is a click on
                // it, a character or a paste types into it.
                let keys = j.keys.clone();
                let (mut w, mut popup) = self.keyboard_window(j).await?;
                let mut before = self.read_window(s, &w).await?;
                j.check_focus(&self.focus_fact(
                    s,
                    w.window_id,
                    &before.tree.nodes,
                    before.tree.truncated.is_some(),
                    popup,
                ))?;
                let approval = self
                    .approve_act(s, call, &keys_subject(&before, &keys))
                    .await?;
                if let Some(digest) = approval.digest {
                    (w, popup) = self.keyboard_window(j).await?;
                    before = self.read_window(s, &w).await?;
                    j.check_focus(&self.focus_fact(
                        s,
                        w.window_id,
                        &before.tree.nodes,
                        before.tree.truncated.is_some(),
                        popup,
                    ))?;
                    self.check_approved(Some(&digest), call, &keys_subject(&before, &keys))?;
                }
                self.send_synthetic(s, call, &w, SynthOp::Keys { keys }, None)
                    .await?;
                let t = Target {
                    shown: before.tree.nodes.clone(),
                    node: before.tree.nodes[0].clone(),
                    before: before.tree.nodes.clone(),
                    truncated: before.tree.truncated,
                    row: 0,
                    window: w,
                    reused_under: None,
                    recheck_ms: 0,
                };
                let ms = started.elapsed().as_millis() as u64;
                Box::pin(
                    self.finish_act(
                        s,
                        call,
                        &t,
                        Verify::None,
                        approval.effect,
                        if self.backend.frame_origin() == FrameOrigin::Window {
                            "portal:key"
                        } else {
                            "xtest:key"
                        }
                        .into(),
                        true,
                        None,
                        ms,
                        None,
                        j,
                    ),
                )
                .await
            }
            Call::BringToFront(target) => {
                let w = self.resolve_window(j, target).await?;
                self.send_synthetic(
                    s,
                    call,
                    &w,
                    SynthOp::Raise {
                        window_id: w.window_id,
                    },
                    None,
                )
                .await?;
                // The raise was sent: a listing that fails now leaves it unverified (dispatched),
                // never a refusal that would say nothing happened.
                let all = self
                    .bounded("listing windows", self.backend.list_windows())
                    .await
                    .unwrap_or_default();
                let now = all.iter().find(|x| x.window_id == w.window_id);
                let top = all.iter().filter(|x| x.visible).max_by_key(|x| x.stacking);
                let verified = now.is_some_and(|x| x.active)
                    && top.is_some_and(|x| x.window_id == w.window_id);
                self.audit.emit(AuditEvent::Act, Some(&s.id), json!({"tool": tool, "mode": "takeover", "path": "ewmh:activate",
                                                             "verified": verified, "window_id": w.window_id}));
                let mut out = done("ewmh:activate", w.window_id);
                out["effect"] = json!(if verified { "confirmed" } else { "dispatched" });
                out["verified"] = json!(verified);
                out["took_cursor"] = json!(false);
                if let Some(o) = out.as_object_mut() {
                    o.remove("window_id");
                }
                Ok(Output::json(out))
            }
            Call::MoveCursor {
                token,
                x,
                y,
                scope,
                duration_ms,
            } => {
                let (x, y, window) = if let Some(tok) = token {
                    let t = self.synth_target(s, tok, j).await?;
                    let (x, y) = t.center()?;
                    (x, y, t.window)
                } else {
                    let (Some(x), Some(y)) = (x, y) else {
                        return Err(DriverError::new(
                            ErrorCode::InvalidArguments,
                            "give element_token, or x and y",
                        ));
                    };
                    let (x, y) = (*x as i32, *y as i32);
                    if *scope == Scope::Window {
                        let (w, _) = self.keyboard_window(j).await?;
                        (w.frame.x + x, w.frame.y + y, w)
                    } else {
                        let all = self
                            .bounded_read("listing windows", self.backend.list_windows())
                            .await?;
                        let w = topmost_at(&all, x, y).cloned().ok_or_else(|| {
                            DriverError::new(
                                ErrorCode::AppNotInScope,
                                "no approved window at that point",
                            )
                        })?;
                        j.admit(&self.window_fact(Reach::Point, w.pid))?;
                        (x, y, w)
                    }
                };
                if !window.frame.contains_point(x, y) {
                    return Err(DriverError::new(
                        ErrorCode::InvalidArguments,
                        "the point lies outside the window",
                    ));
                }
                let duration_ms = *duration_ms;
                self.send_synthetic(s, call, &window, SynthOp::Move { x, y, duration_ms }, None)
                    .await?;
                self.audit.emit(AuditEvent::Act, Some(&s.id), json!({"tool": tool, "mode": "takeover", "path": "xtest:motion",
                                                             "window_id": window.window_id, "duration_ms": duration_ms}));
                let mut out = done("xtest:motion", window.window_id);
                if let Some(o) = out.as_object_mut() {
                    o.remove("window_id");
                }
                Ok(Output::json(out))
            }
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "no synthetic path for this tool",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::errors::Retry;

    #[test]
    fn a_long_text_is_given_its_pace_beyond_the_bound() {
        // The longest type_text (10000 characters) at Wayland's measured pace (about 20 ms a
        // character, checks included) fits; a short one adds little to the bound for a hang
        // (its keys' pace and the look at the keyboard layout).
        let long = SynthOp::Type {
            text: "é".repeat(10_000),
        };
        assert!(paced(&long) >= Duration::from_millis(20) * 10_000);
        assert_eq!(
            paced(&SynthOp::Type { text: "ab".into() }),
            PACE_PER_KEY * 2 + LAYOUT_READ
        );
        // A Return or Tab gets the wait before its focus check on top.
        assert_eq!(
            paced(&SynthOp::Type {
                text: "a\nb\t".into()
            }),
            PACE_PER_KEY * 4 + ACTING_KEY_SETTLE * 2 + LAYOUT_READ
        );
        assert_eq!(
            paced(&SynthOp::Keys {
                keys: vec!["ctrl+shift+t".into(), "Return".into()]
            }),
            PACE_PER_KEY * 4 + LAYOUT_READ
        );
        assert_eq!(
            paced(&SynthOp::Move {
                x: 1,
                y: 1,
                duration_ms: 700
            }),
            Duration::from_millis(700)
        );
        assert_eq!(
            paced(&SynthOp::Click {
                x: 1,
                y: 1,
                button: 1,
                count: 1
            }),
            Duration::ZERO
        );
    }

    #[test]
    fn a_type_text_failure_after_its_focusing_click_never_says_nothing_happened() {
        // The typing refused before its first key (the focus was elsewhere): the click was
        // sent, so the answer is focus_changed (unsafe), stopped, nothing typed.
        let e = after_focusing_click(
            DriverError::new(ErrorCode::Occluded, "no key sent").with_effect("refused"),
        );
        assert_eq!(e.code, ErrorCode::FocusChanged);
        assert_eq!(e.effect.as_deref(), Some("stopped"));
        assert_eq!(e.typed_characters, Some(0));
        assert!(e.message.ends_with("the focusing click was sent"));
        // A safe or after-refresh failure (the agent down before the keys, a stale re-read)
        // becomes unsafe: something happened.
        for code in [
            ErrorCode::RateLimited,
            ErrorCode::StaleElementToken,
            ErrorCode::ElementNotFound,
        ] {
            let e = after_focusing_click(DriverError::new(code, "x").with_effect("refused"));
            assert_eq!(e.code.retry(), Retry::Unsafe, "{code:?}");
            assert_eq!(e.effect.as_deref(), Some("stopped"));
        }
        // Unsafe and never codes keep their code, but never say nothing happened: stopped,
        // nothing typed, the click said; a pause's reason is kept.
        for code in [
            ErrorCode::AppNotResponding,
            ErrorCode::UserTookOver,
            ErrorCode::SecureField,
            ErrorCode::Unsupported,
            ErrorCode::AppNotInScope,
        ] {
            let mut refused =
                DriverError::new(code, "no key gives it; nothing was sent").with_effect("refused");
            refused.paused_reason = Some("person_input".into());
            let e = after_focusing_click(refused);
            assert_eq!(e.code, code);
            assert_eq!(e.effect.as_deref(), Some("stopped"), "{code:?}");
            assert_eq!(e.typed_characters, Some(0));
            assert_eq!(e.message, "no key gives it; the focusing click was sent");
            assert_eq!(e.paused_reason.as_deref(), Some("person_input"));
        }
        // A typing that stopped part way says so itself: kept whole.
        let mut part = DriverError::new(ErrorCode::UserTookOver, "stopped").with_effect("stopped");
        part.typed_characters = Some(3);
        assert_eq!(after_focusing_click(part.clone()), part);
    }
}
