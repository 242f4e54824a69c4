//! The indicator's part: the consent dialog (closed when its call is dropped, its answer
//! re-validated), and the takeover frame.

use std::sync::Arc;
use std::time::Duration;

use nish_decider::backend::ConsentRequest;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentDialog, IndicatorToBroker, ShowConsent,
};
use nish_proto::wire::input;

use crate::agents::{Agent, RequestError};
use crate::linux::{LinuxBackend, SHOW_TIMEOUT};
use crate::slot::CallKind;

pub(crate) async fn consent(
    b: &LinuxBackend,
    req: ConsentRequest,
) -> Result<ConsentAnswer, DriverError> {
    // On Wayland the indicator draws the dialog as a native Wayland client (the broker
    // hands it the compositor's socket); the request and the re-validation are the same.
    let ind = b.indicator().await?;
    let id = ind.next_id();
    let timeout = req.timeout();
    let call = ShowConsent(ConsentDialog {
        id,
        request: req.clone(),
    });
    // Close the dialog if this call is dropped (session closed, kill switch, end_session).
    struct Cancel(Option<(Arc<Agent<BrokerToIndicator, IndicatorToBroker>>, u64)>);
    impl Drop for Cancel {
        fn drop(&mut self) {
            if let Some((a, id)) = self.0.take() {
                tokio::spawn(async move {
                    let _ = a.send(BrokerToIndicator::CancelConsent { id }).await;
                });
            }
        }
    }
    let mut guard = Cancel(Some((ind.clone(), id)));
    // The dialog's text for screen readers, while its call runs (see `crate::narrator`).
    let _narration = narrate(b, id, &req);
    let answer = ind.call(id, call, timeout + Duration::from_secs(5)).await;
    let answer = match answer {
        Ok(Ok(answer)) => {
            guard.0 = None;
            answer
        }
        Ok(Err(never)) => match never {},
        // No answer in time is a denial.
        Err(RequestError::TimedOut(_)) => ConsentAnswer {
            allow: false,
            apps: vec![],
            programs: vec![],
            takeover: false,
            clipboard: false,
        },
        // The indicator exited with the dialog up: nothing was granted, and a new
        // start_session shows a new dialog.
        Err(e) => {
            guard.0 = None;
            return Err(b.indicator.failed(&ind, e, CallKind::Read).await);
        }
    };
    Ok(revalidate(&req, answer))
}

/// Serves the text of consent dialog `id` on the accessibility bus from when the indicator says
/// it is on screen until the returned guard is dropped (the dialog's call ended, whichever
/// way).
fn narrate(b: &LinuxBackend, id: u64, req: &ConsentRequest) -> impl Drop {
    struct Narrating(Arc<std::sync::Mutex<crate::linux::IndicatorWaiters>>, u64);
    impl Drop for Narrating {
        fn drop(&mut self) {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .narrations
                .remove(&self.1);
        }
    }
    let (tx, rx) = tokio::sync::watch::channel(None);
    {
        let mut w = b
            .indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The indicator shows one dialog at a time; a few calls may overlap while one ends.
        if w.narrations.len() >= MAX_NARRATIONS {
            w.narrations.clear();
        }
        w.narrations.insert(id, tx);
    }
    let opener = b.opener.clone();
    tokio::spawn(crate::narrator::serve(
        async move { opener.a11y_address().await.ok() },
        req.clone(),
        rx,
    ));
    Narrating(b.indicator_answers.clone(), id)
}

/// Consent dialogs read out at once, at most (the indicator shows one at a time).
const MAX_NARRATIONS: usize = 4;

/// The indicator's answer re-validated against the request: only apps the dialog listed (name
/// and program together), only extra lines it showed; an answer whose programs do not pair
/// with its apps grants no app.
pub fn revalidate(req: &ConsentRequest, answer: ConsentAnswer) -> ConsentAnswer {
    let listed: Vec<(&str, &str)> = req
        .apps
        .iter()
        .map(|a| (a.name.as_str(), a.program.as_str()))
        .collect();
    let (apps, programs): (Vec<String>, Vec<String>) = if answer.apps.len() == answer.programs.len()
    {
        answer
            .apps
            .into_iter()
            .zip(answer.programs)
            .filter(|(a, p)| listed.contains(&(a.as_str(), p.as_str())))
            .unzip()
    } else {
        (vec![], vec![])
    };
    ConsentAnswer {
        allow: answer.allow,
        apps,
        programs,
        takeover: answer.takeover && req.takeover,
        clipboard: answer.clipboard && req.clipboard,
    }
}

pub(crate) async fn show_indicator(
    b: &LinuxBackend,
    session: &str,
    paused: bool,
    clipboard: bool,
) -> Result<(), DriverError> {
    if b.on_wayland() {
        // The desktop's dialog first (the person allows remote control there, after the
        // driver's own), then the driver's own surface; without it, no takeover.
        // The portal's clipboard is asked for only where the session has the clipboard line
        // and the compositor gives the input agent none (GNOME): the desktop's dialog then
        // offers it too.
        let clipboard = clipboard && !b.input_probe().await.is_ok_and(|p| p.clipboard_ok);
        b.remote
            .begin(b.session_bus().as_deref(), &b.opener, session, clipboard)
            .await?;
        let shown = show_surface(b, session, paused).await;
        if shown.is_err() {
            b.remote.end(session).await;
        }
        return shown;
    }
    show_surface(b, session, paused).await
}

/// Numbers the broker's shows of the takeover frame (`ShowTakeover`'s `show`), never reused.
static SHOWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Shows the indicator's takeover frame (X11) or surface (Wayland) and waits for it to be on
/// screen: for the `TakeoverShown` that answers this show, by its number (the indicator answers
/// every show, also of a frame already up). One show of a session at a time.
async fn show_surface(b: &LinuxBackend, session: &str, paused: bool) -> Result<(), DriverError> {
    let ind = b.indicator().await?;
    let show = SHOWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (tx, rx) = tokio::sync::oneshot::channel();
    {
        let mut w = b
            .indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if w.shown.contains_key(session) {
            return Err(DriverError::new(
                ErrorCode::BackendUnavailable,
                "the takeover frame of this session is being shown already",
            ));
        }
        w.shown.insert(session.to_string(), (show, tx));
    }
    // Until it is on screen in time, a way out (an error, a timeout, the call dropped) takes
    // this show's wait away and hides whatever of it is up.
    let mut undo = UndoShow {
        b,
        ind: &ind,
        session,
        show,
        armed: true,
    };
    ind.send(BrokerToIndicator::ShowTakeover {
        session: session.into(),
        paused,
        show,
    })
    .await?;
    match tokio::time::timeout(SHOW_TIMEOUT, rx).await {
        Ok(Ok(())) => {
            undo.armed = false;
            Ok(())
        }
        _ => Err(DriverError::new(
            ErrorCode::BackendUnavailable,
            format!(
                "the takeover frame was not on screen within {} ms",
                SHOW_TIMEOUT.as_millis()
            ),
        )),
    }
}

/// Undoes a show that did not come through: its wait goes (only its own, by number), the
/// session's frame is no longer on, and the indicator is told to hide it (queued: this runs
/// when a call is dropped too). A takeover is not granted without its frame.
struct UndoShow<'a> {
    b: &'a LinuxBackend,
    ind: &'a crate::agents::Agent<BrokerToIndicator, IndicatorToBroker>,
    session: &'a str,
    show: u64,
    armed: bool,
}

impl Drop for UndoShow<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        {
            let mut w = self
                .b
                .indicator_answers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if w.shown
                .get(self.session)
                .is_some_and(|(n, _)| *n == self.show)
            {
                w.shown.remove(self.session);
            }
            w.on.remove(self.session);
        }
        if let Err(e) = self.ind.queue(BrokerToIndicator::HideTakeover {
            session: self.session.into(),
        }) {
            tracing::warn!("the takeover frame's hide was not sent: {}", e.message);
        }
    }
}

pub(crate) async fn set_indicator_paused(b: &LinuxBackend, session: &str, paused: bool) {
    if let Some(ind) = b.indicator.current().await {
        let _ = ind
            .send(BrokerToIndicator::SetPaused {
                session: session.into(),
                paused,
            })
            .await;
    }
}

pub(crate) async fn hide_indicator(b: &LinuxBackend, session: &str) {
    {
        // A show still waiting for its answer is hidden too: an answer on its way must not
        // end that wait.
        let mut w = b
            .indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        w.on.remove(session);
        w.shown.remove(session);
    }
    if let Some(ind) = b.indicator.current().await {
        let _ = ind
            .send(BrokerToIndicator::HideTakeover {
                session: session.into(),
            })
            .await;
    }
    if b.on_wayland() {
        // The engine raised the act's stop flag first: the act under way sends nothing more.
        b.remote.end(session).await;
        return;
    }
    // One takeover at a time: with its frame gone, nobody's input is watched.
    if b.input.current().await.is_some()
        && let Err(e) = b.input_ack(input::Watch { on: false }).await
    {
        tracing::warn!("the input agent did not stop watching: {}", e.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::indicator::{ConsentApp, HostProgram};

    #[test]
    fn only_the_answer_to_the_show_awaited_marks_the_frame_on() {
        let mut w = crate::linux::IndicatorWaiters::default();
        // Show 1 of the session timed out (its waiter gone, the frame hidden); show 2 waits.
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        w.shown.insert("s".into(), (2, tx));
        assert!(!w.takeover_shown("s", 1), "the late answer to show 1");
        assert!(
            !w.on.contains("s") && rx.try_recv().is_err(),
            "show 2 still waits"
        );
        assert!(!w.takeover_shown("t", 2), "another session's answer");
        assert!(w.takeover_shown("s", 2));
        assert!(w.on.contains("s") && rx.try_recv().is_ok());
        assert!(!w.takeover_shown("s", 2), "answered once");
    }

    fn line(name: &str, program: &str) -> ConsentApp {
        ConsentApp {
            name: name.into(),
            ticked: false,
            windows: 1,
            program: program.into(),
        }
    }

    fn answer(apps: &[&str], programs: &[&str]) -> ConsentAnswer {
        ConsentAnswer {
            allow: true,
            apps: apps.iter().map(|a| a.to_string()).collect(),
            programs: programs.iter().map(|p| p.to_string()).collect(),
            takeover: true,
            clipboard: true,
        }
    }

    #[test]
    fn only_listed_name_and_program_pairs_and_shown_lines_are_granted() {
        let req = ConsentRequest {
            host_claimed: String::new(),
            program: HostProgram::default(),
            apps: vec![
                line("Calculator", "gnome-calculator"),
                line("Calculator", "evil-calc"),
            ],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: false,
            clipboard: true,
            timeout_ms: 60_000,
        };
        let a = revalidate(&req, answer(&["Calculator"], &["gnome-calculator"]));
        assert_eq!(
            (a.apps, a.programs),
            (
                vec!["Calculator".to_string()],
                vec!["gnome-calculator".to_string()]
            )
        );
        assert!(!a.takeover, "a line not shown is never granted");
        assert!(a.clipboard);
        // A program the dialog did not list with that name is dropped.
        let a = revalidate(
            &req,
            answer(&["Calculator", "Calculator"], &["calc", "evil-calc"]),
        );
        assert_eq!(a.programs, ["evil-calc"]);
        // Programs that do not pair with the apps: no app.
        let a = revalidate(&req, answer(&["Calculator"], &[]));
        assert!(a.apps.is_empty() && a.programs.is_empty());
    }
}
