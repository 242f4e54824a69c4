//! The indicator as a native Wayland client, for a Wayland session (no XWayland: an X client
//! there can be clicked by any other X client): the consent dialog ([`dialog`]) and the
//! takeover surface ([`takeover`]), each one `xdg_toplevel`; both may be up at once.
//!
//! The broker connects to the compositor and hands the stream over; the protocol runs in pure
//! Rust (`wayland-client`), the pixels are drawn in software into shared memory made before the
//! lock-down ([`crate::sys::ShmMem`]). The dialog's toplevel, asked to be full screen, dims the
//! screen and shows the dialog box in its middle, with the same layout and renderer as the X11
//! dialog ([`crate::render`]), at the outputs' scale (`wl_output.scale`, as the buffer scale).
//! The compositor may give it another size (sway tiles it beside the other windows when one of
//! them takes the focus): the box is laid out again for each new size, its text smaller when
//! it would not fit, so that every control stays inside the window.
//!
//! The takeover surface is shown when the broker asks (`ShowTakeover`): not full screen and not
//! on top (no Wayland client can keep a window on top where there is no layer-shell, as on
//! GNOME), the X11 label's text and red, and while paused Continue; where the compositor offers
//! layer-shell, with the X11 frame's red ring round every screen ([`ring`]). `TakeoverShown`
//! follows once the compositor configured them and their first pictures are committed; when a
//! side of the ring is closed by the compositor, every takeover ends (`TakeoverLost`
//! "indicator_destroyed"); when the compositor
//! connection fails every takeover ends (`TakeoverLost` "display_lost", as on X11). A close
//! request is ignored, as on the dialog.
//!
//! The event handlers are in [`state`]; the click rule's facts per toplevel in [`gate`]; the
//! shared memory's buffers in [`buffers`].
//!
//! What counts as the person's answer on the dialog, and as their click on Continue (the rule
//! of [`crate::click::RealClick`], with the facts a Wayland client has):
//! - only a left-button press and release on the same control, from the compositor's
//!   `wl_pointer` (a Wayland client gets input from nobody else);
//! - only while its surface is the focused toplevel (`xdg_toplevel` state `activated`): a
//!   press while another window has focus, or the press that gives the surface focus, never
//!   counts;
//! - only [`crate::click::ARM_DELAY`] after the surface was shown, resized or got focus back
//!   (and Continue appeared);
//! - only at a pointer point the compositor told at least the arming delay after the surface
//!   was shown or resized (or Continue appeared; during mutter's map animation the points are
//!   on the animated surface, and none is told again when it ends under a resting pointer);
//! - never a key: the indicator asks the seat for no keyboard at all, so no key event reaches
//!   it; a close request (a key shortcut of the compositor) is ignored;
//! - never within [`crate::click::DRIVER_QUIET`] of the driver's own press (`DriverPress`);
//! - events are timed when they were read from the compositor's socket, and a stall of the
//!   indicator (its event loop did not run for [`crate::click::STALL_MARGIN`] past its poll timeout, as when
//!   another process of the user stops it with `SIGSTOP`) starts the arming delay and the
//!   distrust of the pointer's point again before the events read after it are handled: a
//!   click queued while it was stopped never counts;
//! - the surface entering or leaving an output (moved to another screen) starts them again
//!   too.
//!
//! What a Wayland client cannot know: whether another window covers it (no stacking is
//! visible to a client), and whether a pointer event came from a device or from a
//! RemoteDesktop session (the compositor gives both the same way). See docs/security.md.

mod buffers;
mod dialog;
mod gate;
mod ring;
mod state;
mod takeover;

use std::time::{Duration, Instant};

use nish_proto::wire::indicator::{BrokerToIndicator, ConsentShown, IndicatorToBroker};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wayland_client::protocol::wl_shm;
use wayland_client::{Connection, EventQueue};

use crate::app::Exit;
use crate::click::{Liveness, TICK};
use crate::consent::{TITLE, denied};
use crate::i18n::Messages;
use crate::link::{BrokerLink, Incoming};
use crate::render::fonts::Fonts;
use crate::render::theme;
use crate::sys::ShmMem;
use dialog::{Look, WlDialog};
use gate::Gate;
use ring::{Colour, Parts, Ring};
use state::State;
use takeover::WlTakeover;

/// The shared memory: two buffers of up to 3840 x 2160 pixels for the consent dialog, two
/// small ones for the takeover surface and two of one pixel for the takeover frame (a sparse
/// memfd: only drawn pages take memory).
pub const POOL_BYTES: usize = RING_OFFSET + 2 * 4;
/// Where the takeover frame's two pixels are in the shared memory.
const RING_OFFSET: usize = 2 * SLOT_BYTES + 2 * TAKEOVER_SLOT_BYTES;
/// One consent dialog buffer's bytes.
const SLOT_BYTES: usize = 3840 * 2160 * 4;
/// One takeover surface buffer's bytes (its size at scale 3 with room to spare).
const TAKEOVER_SLOT_BYTES: usize = 1600 * 400 * 4;

/// The indicator on a Wayland session: the consent dialog and the takeover surface (no stop
/// hotkey: on Wayland the broker has it through the desktop portal).
#[derive(Debug)]
pub struct WlApp {
    link: BrokerLink,
    conn: Connection,
    queue: EventQueue<State>,
    state: State,
    /// Whether the event loop kept running (beats when it woke from its poll, after reading).
    live: Liveness,
    /// What the broker was last told the open dialog shows.
    told: Option<(u64, ConsentShown)>,
}

impl WlApp {
    /// Sets up the globals on the handed connection and tells the broker it is ready.
    pub fn new(
        stream: std::os::unix::net::UnixStream,
        mem: ShmMem,
        link: BrokerLink,
        msgs: Messages,
        fonts: Fonts,
    ) -> anyhow::Result<WlApp> {
        let conn = Connection::from_socket(stream)
            .map_err(|e| anyhow::anyhow!("error using the handed Wayland connection: {e}"))?;
        let mut queue = conn.new_event_queue();
        let qh = queue.handle();
        conn.display().get_registry(&qh, ());
        let mut state = State {
            qh: qh.clone(),
            compositor: None,
            shm: None,
            wm: None,
            layer_shell: None,
            viewporter: None,
            seat: None,
            pointer: None,
            outputs: Vec::new(),
            output_scales: Vec::new(),
            output_names: Vec::new(),
            pool: None,
            mem,
            busy: [false; 4],
            dialog: None,
            takeover: None,
            pointer_on: None,
            pointer_at: None,
            pointer_told_at: None,
            batch_at: Instant::now(),
            last_driver_press: None,
            answers: Vec::new(),
            continues: Vec::new(),
            look: Look {
                fonts,
                theme: theme::LIGHT,
                msgs,
            },
        };
        queue.roundtrip(&mut state)?;
        anyhow::ensure!(
            state.compositor.is_some(),
            "the compositor has no wl_compositor"
        );
        anyhow::ensure!(state.wm.is_some(), "the compositor has no xdg_wm_base");
        let shm = state
            .shm
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the compositor has no wl_shm"))?;
        let len = i32::try_from(state.mem.len())?;
        state.pool = Some(shm.create_pool(state.mem.fd(), len, &qh, ()));
        // The seat's capabilities (the pointer).
        queue.roundtrip(&mut state)?;
        if state.pointer.is_none() {
            tracing::warn!(
                "the seat has no pointer yet: the dialog cannot be answered until it has"
            );
        }
        let mut link = link;
        link.send(&IndicatorToBroker::Ready {
            hotkey_grabbed: false,
        })?;
        Ok(WlApp {
            link,
            conn,
            queue,
            state,
            live: Liveness::new(Instant::now()),
            told: None,
        })
    }

    /// Runs until the broker closes the link or the compositor connection is lost.
    pub fn run(mut self) -> Exit {
        let backlog = self.link.take_backlog();
        for m in backlog {
            if let Err(e) = self.broker_message(m) {
                tracing::info!("broker link ended: {e:?}");
                return Exit::BrokerClosed;
            }
        }
        self.live = Liveness::new(Instant::now());
        loop {
            match self.step() {
                Ok(None) => {}
                Ok(Some(exit)) => return exit,
                Err(e) => {
                    tracing::error!("Wayland connection lost: {e}");
                    if let Some(d) = self.state.dialog.take() {
                        let _ = self.link.send(&IndicatorToBroker::Consent {
                            id: d.id,
                            answer: denied(),
                        });
                    }
                    // As on X11: the takeover ends at once.
                    if let Some(t) = self.state.takeover.take() {
                        for session in t.sessions() {
                            let _ = self.link.send(&IndicatorToBroker::TakeoverLost {
                                session,
                                reason: "display_lost".into(),
                            });
                        }
                    }
                    return Exit::DisplayLost;
                }
            }
        }
    }

    /// Sends the answers the handlers made (closes the answered dialog), the Continue clicks,
    /// and that the takeover surface is shown.
    fn flush_answers(&mut self) -> Result<(), Fail> {
        for session in std::mem::take(&mut self.state.continues) {
            self.send(IndicatorToBroker::Continue { session })?;
        }
        // The compositor closed a side of the frame: it is no longer whole, and the takeover
        // ends (as when another X client unmaps the X11 frame).
        if let Some(t) = self
            .state
            .takeover
            .take_if(|t| t.ring.as_ref().is_some_and(|r| r.lost()))
        {
            for session in t.sessions() {
                self.send(IndicatorToBroker::TakeoverLost {
                    session,
                    reason: "indicator_destroyed".into(),
                })?;
            }
            t.destroy();
        }
        let shown = self.state.takeover.as_mut().map(|t| t.shown_notes());
        if shown.as_ref().is_some_and(|s| !s.is_empty()) {
            // What was committed reaches the compositor before the broker hears of it.
            self.conn
                .flush()
                .map_err(|e| Fail::Display(e.to_string()))?;
        }
        for (session, show) in shown.unwrap_or_default() {
            tracing::info!("takeover indicator shown");
            self.send(IndicatorToBroker::TakeoverShown { session, show })?;
        }
        for (id, answer) in std::mem::take(&mut self.state.answers) {
            if let Some(d) = self.state.dialog.take_if(|d| d.id == id) {
                d.destroy();
            }
            tracing::info!("consent {id} answered (allow: {})", answer.allow);
            self.link
                .send(&IndicatorToBroker::Consent { id, answer })
                .map_err(|e| Fail::Broker(e.to_string()))?;
        }
        Ok(())
    }

    /// Tells the broker what the open dialog shows (once it is laid out and configured), when
    /// that changed since it was last told. No focus ring: the Wayland dialog takes no keys.
    fn tell_shown(&mut self) -> Result<(), Fail> {
        let now = self.state.dialog.as_ref().and_then(|d| {
            let l = d.layout.as_ref().filter(|_| d.gate.configured)?;
            let lang = self.state.look.msgs.lang();
            Some((d.id, crate::consent::shown(l, None, lang, false, false)))
        });
        if now.is_none() || self.told == now {
            self.told = now;
            return Ok(());
        }
        self.told = now.clone();
        let (id, shown) = now.expect("checked");
        self.send(IndicatorToBroker::ConsentShown { id, shown })
    }

    fn step(&mut self) -> anyhow::Result<Option<Exit>> {
        match self.turn().and_then(|t| self.tell_shown().map(|()| t)) {
            Ok(v) => Ok(v),
            Err(Fail::Broker(e)) => {
                tracing::info!("broker link ended: {e}");
                self.remove();
                Ok(Some(Exit::BrokerClosed))
            }
            Err(Fail::Display(e)) => Err(anyhow::anyhow!(e)),
        }
    }

    fn turn(&mut self) -> Result<Option<Exit>, Fail> {
        let wl = |e: &dyn std::fmt::Display| Fail::Display(e.to_string());
        self.queue
            .dispatch_pending(&mut self.state)
            .map_err(|e| wl(&e))?;
        self.flush_answers()?;
        self.timers()?;
        self.conn.flush().map_err(|e| wl(&e))?;
        let Some(guard) = self.queue.prepare_read() else {
            return Ok(None);
        };
        let timeout = self
            .state
            .dialog
            .as_ref()
            .map(|d| {
                d.deadline
                    .saturating_duration_since(Instant::now())
                    .min(TICK)
            })
            .unwrap_or(Duration::from_secs(5));
        // Continue can be clicked: a stall must be seen as with the dialog.
        let timeout = match self.state.takeover {
            Some(_) => timeout.min(TICK),
            None => timeout,
        };
        let ms = timeout.as_millis().clamp(1, 5000) as u16;
        self.live.waiting(Duration::from_millis(u64::from(ms)));
        let (link_ready, wl_ready) = {
            let mut fds = [
                PollFd::new(self.link.fd(), PollFlags::POLLIN),
                PollFd::new(guard.connection_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => return Ok(None),
                Err(e) => return Err(Fail::Broker(format!("poll: {e}"))),
            }
            let r = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
            let any = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
            (r(0).intersects(any), r(1).intersects(any))
        };
        if wl_ready {
            guard.read().map_err(|e| wl(&e))?;
        } else {
            drop(guard);
        }
        // The events just read came in since the last wake-up: if that was much longer ago
        // than the wait allowed, the indicator was stopped (or starved) meanwhile, and what
        // the person did then was not done on a dialog shown for the arming delay.
        let now = Instant::now();
        let stall = self.live.beat(now);
        self.state.batch_at = now;
        if let Some(gap) = stall
            && (self.state.dialog.is_some() || self.state.takeover.is_some())
        {
            let what = match (&self.state.dialog, &self.state.takeover) {
                (Some(_), Some(_)) => "the consent dialog is re-armed, and Continue",
                (Some(_), None) => "the consent dialog is re-armed",
                _ => "Continue is re-armed",
            };
            tracing::info!(
                gap_ms = gap.as_millis() as u64,
                "the indicator did not run for a while: {what}"
            );
            self.state.restart_trust(now, "stalled", None);
        }
        // The broker's messages first, as on X11: a `DriverPress` that came with the press it
        // announces is known before that press is judged.
        if link_ready {
            match self
                .link
                .read_available()
                .map_err(|e| Fail::Broker(e.to_string()))?
            {
                Incoming::Closed => {
                    tracing::info!("broker closed the link; removing the dialog");
                    self.remove();
                    return Ok(Some(Exit::BrokerClosed));
                }
                Incoming::Messages(msgs) => {
                    for m in msgs {
                        self.broker_message(m)?;
                    }
                }
            }
        }
        if wl_ready {
            self.queue
                .dispatch_pending(&mut self.state)
                .map_err(|e| wl(&e))?;
            self.flush_answers()?;
        }
        self.conn.flush().map_err(|e| wl(&e))?;
        Ok(None)
    }

    fn timers(&mut self) -> Result<(), Fail> {
        let now = Instant::now();
        if let Some(d) = self.state.dialog.take_if(|d| now >= d.deadline) {
            tracing::info!("consent {} timed out: denied", d.id);
            let id = d.id;
            d.destroy();
            self.send(IndicatorToBroker::Consent {
                id,
                answer: denied(),
            })?;
        }
        Ok(())
    }

    fn send(&mut self, msg: IndicatorToBroker) -> Result<(), Fail> {
        self.link
            .send(&msg)
            .map_err(|e| Fail::Broker(e.to_string()))
    }

    fn remove(&mut self) {
        if let Some(d) = self.state.dialog.take() {
            d.destroy();
        }
        if let Some(t) = self.state.takeover.take() {
            t.destroy();
        }
        let _ = self.conn.flush();
        let _ = self.queue.roundtrip(&mut self.state);
    }

    fn broker_message(&mut self, msg: BrokerToIndicator) -> Result<(), Fail> {
        let now = Instant::now();
        match msg {
            BrokerToIndicator::Config {
                accept_xtest_clicks,
            } => {
                if accept_xtest_clicks {
                    tracing::info!("the XTEST opt-in has no meaning on Wayland: ignored");
                }
            }
            BrokerToIndicator::DriverPress => {
                self.state.last_driver_press = Some(now);
                if let Some(d) = &mut self.state.dialog {
                    d.gate.click.driver_press(now);
                }
                if let Some(t) = &mut self.state.takeover {
                    t.gate.click.driver_press(now);
                }
            }
            BrokerToIndicator::ShowConsent(req) => {
                let id = req.id;
                if let Some(d) = &self.state.dialog {
                    if d.id == id {
                        tracing::warn!("consent {id} is already open; duplicate ignored");
                    } else {
                        tracing::info!("consent {id} denied: another consent dialog is open");
                        self.send(IndicatorToBroker::Consent {
                            id,
                            answer: denied(),
                        })?;
                    }
                    return Ok(());
                }
                self.open(req, now);
            }
            BrokerToIndicator::CancelConsent { id } => {
                if let Some(d) = self.state.dialog.take_if(|d| d.id == id) {
                    tracing::info!("consent {id} cancelled");
                    d.destroy();
                }
            }
            BrokerToIndicator::ShowTakeover {
                session,
                paused,
                show,
            } => match &mut self.state.takeover {
                Some(t) => {
                    t.add_session(session, show, paused, now);
                    // Continue may have appeared.
                    self.state.draw();
                }
                None => self.open_takeover(session, show, paused, now)?,
            },
            BrokerToIndicator::SetPaused { session, paused } => {
                if !self
                    .state
                    .takeover
                    .as_mut()
                    .is_some_and(|t| t.set_paused(&session, paused, now))
                {
                    tracing::debug!("SetPaused for a session without a takeover");
                }
                self.state.draw();
            }
            BrokerToIndicator::HideTakeover { session } => {
                let t = &mut self.state.takeover;
                if t.as_mut().is_some_and(|t| t.remove_session(&session, now)) {
                    tracing::info!("takeover hidden for a session");
                }
                if let Some(t) = t.take_if(|t| t.is_empty()) {
                    tracing::info!("takeover surface removed");
                    t.destroy();
                }
                self.state.draw();
            }
            BrokerToIndicator::Connected { id, .. } => {
                tracing::debug!("an answer to connection request {id} nobody waits for");
            }
        }
        Ok(())
    }

    fn open(&mut self, dialog: nish_proto::wire::indicator::ConsentDialog, now: Instant) {
        let st = &mut self.state;
        let (Some(compositor), Some(wm)) = (&st.compositor, &st.wm) else {
            return;
        };
        let qh = &st.qh;
        let surface = compositor.create_surface(qh, ());
        let xdg = wm.get_xdg_surface(&surface, qh, ());
        let toplevel = xdg.get_toplevel(qh, ());
        toplevel.set_title(TITLE.into());
        toplevel.set_app_id("nish-driver".into());
        toplevel.set_fullscreen(None);
        surface.commit();
        let timeout = dialog.request.timeout();
        let gate = Gate::new(("consent dialog", "dialog"), now, st.last_driver_press);
        st.dialog = Some(WlDialog {
            id: dialog.id,
            deadline: now + timeout,
            req: dialog.request,
            surface,
            xdg,
            toplevel,
            layout: None,
            laid_for: ((0, 0), 0),
            size: (0, 0),
            scale: 1,
            origin: (0, 0),
            dirty: true,
            gate,
        });
    }

    /// Shows the takeover surface for `session`; the broker is told it is shown once the
    /// compositor configured it and its first picture is committed.
    fn open_takeover(
        &mut self,
        session: String,
        show: u64,
        paused: bool,
        now: Instant,
    ) -> Result<(), Fail> {
        let scale = self.state.scale();
        let st = &mut self.state;
        let (Some(compositor), Some(wm)) = (&st.compositor, &st.wm) else {
            // As on X11 when the frame cannot be made: the takeover is not granted.
            tracing::warn!("no takeover surface without a compositor");
            return self.send(IndicatorToBroker::TakeoverLost {
                session,
                reason: "display_lost".into(),
            });
        };
        tracing::info!(paused, "takeover surface requested");
        let surface = compositor.create_surface(&st.qh, ());
        let xdg = wm.get_xdg_surface(&surface, &st.qh, ());
        let toplevel = xdg.get_toplevel(&st.qh, ());
        // The frame around the screens, where the compositor offers layer-shell.
        let ring = match (&st.layer_shell, &st.viewporter, &st.pool) {
            (Some(shell), Some(viewporter), Some(pool)) => {
                let px = st.mem.bytes_mut(RING_OFFSET, 8);
                px[..4].copy_from_slice(&crate::xui::rgb::RED.to_le_bytes());
                px[4..].copy_from_slice(&crate::xui::rgb::RED_DIM.to_le_bytes());
                let pixel = |i: usize, c: Colour| {
                    let at = (RING_OFFSET + 4 * i) as i32;
                    pool.create_buffer(at, 1, 1, 4, wl_shm::Format::Xrgb8888, &st.qh, c)
                };
                let buffers = (pixel(0, Colour::Red), pixel(1, Colour::Dim));
                let parts = Parts {
                    compositor,
                    shell,
                    viewporter,
                    qh: &st.qh,
                };
                Some(Ring::new(&parts, &st.outputs, buffers, paused))
            }
            (Some(_), None, _) => {
                // A frame the compositor could draw is not drawn here: no takeover.
                tracing::warn!("layer-shell without wp_viewporter: the frame cannot be drawn");
                return self.refuse_takeover(session, surface, xdg, toplevel);
            }
            _ => None,
        };
        if ring.as_ref().is_some_and(|r| !r.has_sides()) {
            tracing::warn!("no screen to put the takeover frame round");
            if let Some(r) = ring {
                r.destroy();
            }
            return self.refuse_takeover(session, surface, xdg, toplevel);
        }
        st.takeover = Some(WlTakeover::new(
            surface,
            xdg,
            toplevel,
            ring,
            &st.look.fonts,
            scale,
            session,
            show,
            paused,
            now,
            st.last_driver_press,
        ));
        Ok(())
    }
}

impl WlApp {
    /// The takeover surface just made goes, and the broker is told the takeover is lost.
    fn refuse_takeover(
        &mut self,
        session: String,
        surface: wayland_client::protocol::wl_surface::WlSurface,
        xdg: wayland_protocols::xdg::shell::client::xdg_surface::XdgSurface,
        toplevel: wayland_protocols::xdg::shell::client::xdg_toplevel::XdgToplevel,
    ) -> Result<(), Fail> {
        toplevel.destroy();
        xdg.destroy();
        surface.destroy();
        self.send(IndicatorToBroker::TakeoverLost {
            session,
            reason: "display_lost".into(),
        })
    }
}

/// A failure of one turn.
#[derive(Debug)]
enum Fail {
    /// The compositor connection.
    Display(String),
    /// The broker link.
    Broker(String),
}
