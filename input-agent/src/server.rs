//! The input agent's side of the broker protocol.
//!
//! On its socket the agent has sent its hello (role `input`) and its
//! [`InputToBroker::Lockdown`] report at its start (`nish_sandbox::start::start`); it then
//! answers [`BrokerToInput`] requests, each answer
//! carrying its request's id. Headless acts are answered in order on the agent's own thread;
//! synthetic acts, releases, watch changes and probes go in order to the X thread, so a
//! `Cancel` (which needs no answer) reaches an act in progress at once. While watching, the
//! first input of the person is sent unasked ([`InputToBroker::Person`]). Frames are the `nish_proto::wire::codec` frames,
//! at most [`MAX_FRAME_BYTES`]. A frame that does not decode ends the agent (the broker
//! restarts it). The agent exits when the broker closes the socket: a synthetic act in progress
//! stops at once (before its next key, press or move; it is never reported done), every key and
//! button held is released, and the X thread is waited for at most 2 s.
//!
//! Logs (standard error, piped by the broker) name the request id, the kind of act, the path,
//! the code of a failure and, for text, its length: never text, values or app names.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::handed::{FdReader, Handover};
use nish_proto::errors::ErrorCode;
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{FrameError, aio, encode};
use nish_proto::wire::input::{
    BrokerToInput, Expect, InputProbe, InputToBroker, SemanticOp, SynthEnd, SynthOp,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::clipboard;
use crate::failure::ActFailure;
use crate::semantic::{Semantic, op_kind, text_len};
use crate::synth::xtest::{self, Executor};
use crate::synth::{Shared, watcher};

/// Answers one headless request.
pub async fn handle(semantic: &Semantic, id: u64, target: Expect, op: SemanticOp) -> InputToBroker {
    let start = Instant::now();
    let r = semantic.act(&target, &op).await;
    let us = start.elapsed().as_micros() as u64;
    match r {
        Ok(path) => {
            tracing::info!(
                id,
                op = op_kind(&op),
                pid = target.pid,
                text_len = text_len(&op),
                us,
                path = %path,
                "act done"
            );
            InputToBroker::Done { id, path }
        }
        Err(f) => {
            tracing::info!(
                id,
                op = op_kind(&op),
                pid = target.pid,
                text_len = text_len(&op),
                us,
                code = f.code.as_str(),
                sent = f.sent,
                "act failed: {}",
                f.message
            );
            f.to_wire(id)
        }
    }
}

/// Work for the X thread, in order.
enum XJob {
    Synth { id: u64, window: u64, op: SynthOp },
    Release { id: u64 },
    Watch { id: u64, on: bool },
    Probe { id: u64 },
    Focus { id: u64 },
}

/// How long the agent waits, once its link closed, for the X thread to end its act and release
/// what it holds; an X request that never returns (another client's server grab) does not keep
/// the agent alive past it.
const X_THREAD_EXIT: Duration = Duration::from_secs(2);

/// The X thread: the executor of synthetic acts, and the watcher of the person's input on a
/// thread of its own, each on a connection made through `connector`. Without a display every
/// job answers `backend_unavailable`. The receiver returned learns when the thread ends (its
/// sender is dropped then, also by a panic).
fn spawn_x(
    shared: Arc<Shared>,
    connector: Connector,
    jobs: std::sync::mpsc::Receiver<XJob>,
    out: mpsc::UnboundedSender<InputToBroker>,
) -> anyhow::Result<(std::thread::JoinHandle<()>, oneshot::Receiver<()>)> {
    let (ended, ended_rx) = oneshot::channel::<()>();
    let handle = std::thread::Builder::new()
        .name("x-executor".into())
        .spawn(move || {
            let _ended = ended;
            let (watch_tx, watch_rx) = std::sync::mpsc::channel::<watcher::WatchCmd>();
            let mut exec = match Executor::connect(shared.clone(), &connector) {
                Ok(x) => {
                    let (sh, tx, c) = (shared.clone(), out.clone(), connector.clone());
                    let w = std::thread::Builder::new()
                        .name("x-watcher".into())
                        .spawn(move || {
                            let r = watcher::run(sh, &c, watch_rx, |input| {
                                let _ = tx.send(InputToBroker::Person { input });
                            });
                            if let Err(e) = r {
                                tracing::error!("the watcher stopped: {e:#}");
                            }
                        });
                    if let Err(e) = w {
                        tracing::error!("cannot start the watcher: {e}");
                        None
                    } else {
                        Some(x)
                    }
                }
                Err(e) => {
                    tracing::warn!("no synthetic input: {e:#}");
                    None
                }
            };
            let unavailable = |id| {
                ActFailure::refused(
                    ErrorCode::BackendUnavailable,
                    "synthetic input is not available (no X display, or no XTEST)",
                )
                .to_wire(id)
            };
            for job in jobs {
                if shared.gone.load(Ordering::SeqCst) {
                    // Acts still queued are not started.
                    break;
                }
                let answer = match (job, exec.as_mut()) {
                    (XJob::Probe { id }, _) => InputToBroker::Probe {
                        id,
                        probe: xtest::probe(&connector),
                    },
                    (XJob::Synth { id, .. }, None)
                    | (XJob::Release { id }, None)
                    | (XJob::Watch { id, .. }, None)
                    | (XJob::Focus { id }, None) => unavailable(id),
                    (XJob::Focus { id }, Some(x)) => match x.keyboard_focus() {
                        Ok(focus) => {
                            tracing::debug!(
                                id,
                                depth = focus.chain.len(),
                                popup = focus.popup,
                                "keyboard focus"
                            );
                            InputToBroker::Focus { id, focus }
                        }
                        Err(f) => f.to_wire(id),
                    },
                    (XJob::Synth { id, window, op }, Some(x)) => {
                        let t0 = Instant::now();
                        let r = x.run(id, window, &op);
                        let us = t0.elapsed().as_micros() as u64;
                        match r {
                            Ok(end) => {
                                tracing::info!(id, op = op.kind(), us, end = ?end_kind(&end), "synthetic act ended");
                                InputToBroker::Synth { id, end }
                            }
                            Err(f) => {
                                tracing::info!(id, op = op.kind(), us, code = f.code.as_str(), sent = f.sent, "synthetic act failed: {}", f.message);
                                f.to_wire(id)
                            }
                        }
                    }
                    (XJob::Release { id }, Some(x)) => {
                        x.release_all();
                        InputToBroker::Ack { id }
                    }
                    (XJob::Watch { id, on }, Some(_)) => {
                        let (done, answer) = std::sync::mpsc::channel();
                        let r = watch_tx
                            .send(watcher::WatchCmd { on, done })
                            .map_err(|_| anyhow::anyhow!("the watcher stopped"))
                            .and_then(|()| {
                                answer
                                    .recv_timeout(std::time::Duration::from_secs(2))
                                    .map_err(|_| anyhow::anyhow!("the watcher did not answer"))?
                            });
                        match r {
                            Ok(()) => {
                                tracing::info!(id, on, "watching the person's input");
                                InputToBroker::Ack { id }
                            }
                            Err(e) => ActFailure::refused(
                                ErrorCode::BackendUnavailable,
                                format!("the watcher of the person's input failed: {e}"),
                            )
                            .to_wire(id),
                        }
                    }
                };
                if out.send(answer).is_err() {
                    break;
                }
            }
            // The broker is gone: leave nothing held.
            if let Some(x) = exec.as_mut() {
                x.release_all();
            }
        })?;
    Ok((handle, ended_rx))
}

/// Reads the clipboard (bounded by [`clipboard::READ_TIMEOUT`]); logs the length only.
fn clipboard_read(reads: &clipboard::Clipboard, id: u64) -> InputToBroker {
    let t0 = Instant::now();
    let r = reads.read(clipboard::READ_TIMEOUT);
    let us = t0.elapsed().as_micros() as u64;
    match r {
        Ok(text) => {
            tracing::info!(id, len = text.chars().count(), us, "clipboard read");
            InputToBroker::Clipboard { id, text }
        }
        Err(f) => {
            tracing::info!(
                id,
                us,
                code = f.code.as_str(),
                "clipboard not read: {}",
                f.message
            );
            f.to_wire(id)
        }
    }
}

fn end_kind(e: &SynthEnd) -> &'static str {
    match e {
        SynthEnd::Done => "done",
        SynthEnd::Stopped { .. } => "stopped by the person",
        SynthEnd::Cancelled { .. } => "cancelled",
        SynthEnd::Broke { .. } => "refused part-way",
    }
}

async fn write_msg<W: AsyncWrite + Unpin, T: serde::Serialize>(
    w: &mut W,
    msg: &T,
) -> anyhow::Result<()> {
    w.write_all(&encode(msg, MAX_FRAME_BYTES)?).await?;
    w.flush().await?;
    Ok(())
}

/// Serves the broker on `stream` until it closes the connection. Connections to the desktop
/// are asked from the broker on this link: the agent's one [`Connector::Broker`], made here
/// (`nish_atspi::agent::handed`).
pub async fn serve(stream: tokio::net::UnixStream) -> anyhow::Result<()> {
    let (rd, mut wr) = stream.into_split();
    let (mut rd, fds) = FdReader::new(rd);
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<InputToBroker>();
    let ask = out_tx.clone();
    let handover = Handover::new(
        move |id, target| ask.send(InputToBroker::Connect { id, target }).is_ok(),
        fds,
    );
    let connector = Connector::Broker(handover.clone());
    let semantic = Semantic::new(connector.clone());
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if write_msg(&mut wr, &m).await.is_err() {
                break;
            }
        }
    });
    // Headless acts, one at a time in their order, on a task of their own: the read loop goes
    // on meanwhile (an act may wait for a link the broker hands in on this connection).
    let (acts, mut act_rx) = mpsc::unbounded_channel::<(u64, Expect, SemanticOp)>();
    let act_out = out_tx.clone();
    let actor = tokio::spawn(async move {
        while let Some((id, target, op)) = act_rx.recv().await {
            let answer = handle(&semantic, id, target, op).await;
            let _ = act_out.send(answer);
        }
    });
    let shared = Arc::new(Shared::default());
    let clip = Arc::new(clipboard::Clipboard::start(connector.clone())?);
    let (jobs, job_rx) = std::sync::mpsc::channel::<XJob>();
    let (x_thread, x_ended) = spawn_x(shared.clone(), connector, job_rx, out_tx.clone())?;
    let result = loop {
        let req: BrokerToInput = match aio::read_frame(&mut rd, MAX_FRAME_BYTES).await {
            Ok(r) => r,
            Err(FrameError::Closed) => break Ok(()),
            Err(e) => break Err(e.into()),
        };
        let job = match req {
            BrokerToInput::Connected { id, result } => {
                // In order, here: the descriptor that came with it is next in the queue.
                handover.answered(id, result);
                continue;
            }
            BrokerToInput::Semantic { id, target, op } => {
                let _ = acts.send((id, target, op));
                continue;
            }
            BrokerToInput::Cancel { id } => {
                shared.cancelled.store(id, Ordering::SeqCst);
                continue;
            }
            BrokerToInput::Synthetic { id, window_id, op } => XJob::Synth {
                id,
                window: window_id,
                op,
            },
            BrokerToInput::ReleaseAll { id } => XJob::Release { id },
            BrokerToInput::Watch { id, on } => XJob::Watch { id, on },
            BrokerToInput::Probe { id } if clip.is_wayland() => {
                // No X on Wayland: the probe says whether the compositor offers the clipboard.
                let (out, clip) = (out_tx.clone(), clip.clone());
                tokio::task::spawn_blocking(move || {
                    let probe = InputProbe {
                        clipboard_ok: clip.wayland_offered(),
                        ..InputProbe::default()
                    };
                    let _ = out.send(InputToBroker::Probe { id, probe });
                });
                continue;
            }
            BrokerToInput::Probe { id } => XJob::Probe { id },
            BrokerToInput::Focus { id } => XJob::Focus { id },
            BrokerToInput::ClipboardRead { id } => {
                let (out, clip) = (out_tx.clone(), clip.clone());
                tokio::task::spawn_blocking(move || {
                    let _ = out.send(clipboard_read(&clip, id));
                });
                continue;
            }
            BrokerToInput::ClipboardWrite {
                id,
                owner: who,
                text,
            } => {
                let len = text.chars().count();
                // Sent now, so the owner thread does the broker's commands in their order.
                let answer = clip.set(who, text);
                let out = out_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let msg = match clipboard::Owner::wait_set(answer) {
                        Ok(()) => {
                            tracing::info!(id, len, "clipboard written");
                            InputToBroker::Ack { id }
                        }
                        Err(f) => {
                            tracing::info!(
                                id,
                                len,
                                code = f.code.as_str(),
                                "clipboard not written: {}",
                                f.message
                            );
                            f.to_wire(id)
                        }
                    };
                    let _ = out.send(msg);
                });
                continue;
            }
            BrokerToInput::ClipboardRelease { id, owner: who } => {
                let answer = clip.release(who);
                let out = out_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let released = clipboard::Owner::wait_release(answer);
                    tracing::info!(id, released, "clipboard release");
                    let _ = out.send(InputToBroker::Ack { id });
                });
                continue;
            }
        };
        if jobs.send(job).is_err() {
            break Err(anyhow::anyhow!("the X thread stopped"));
        }
    };
    // The link is closed (the broker is gone) or broken: nothing more can be answered, and the
    // indicator's frame may be off the screen already. First of all, no more synthetic input:
    // the act in progress stops at its next step (before its next key, press or move) and the
    // acts queued behind it are not started. A headless act in flight, which may wait for a
    // link only the broker could hand in, and the writer, whose queue the hand-over's closure
    // still holds a sender of, would wait forever: both are ended, so the agent exits instead
    // of staying behind its broker. The X thread releases every key and button it holds
    // before the agent exits, so no key stays down; it is waited for at most
    // `X_THREAD_EXIT`, as an X request may never return.
    shared.gone.store(true, Ordering::SeqCst);
    drop(jobs);
    drop(acts);
    actor.abort();
    writer.abort();
    let _ = actor.await;
    let _ = writer.await;
    // `Ok` or `Err(RecvError)`: the thread ended (its sender went with it).
    if tokio::time::timeout(X_THREAD_EXIT, x_ended).await.is_ok() {
        let _ = x_thread.join();
    } else {
        // Left behind: it ends with the process.
        tracing::error!(
            "the X thread did not finish within {X_THREAD_EXIT:?} after the link closed; \
             exiting without it"
        );
    }
    result
}
