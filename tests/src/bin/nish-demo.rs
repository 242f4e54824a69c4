//! `nish-demo`, what `scripts/demo.sh` runs: a real nish-driver session on a private headless
//! desktop, driven by the official MCP Python client.
//!
//! - `nish-demo [DIR]`: Xvfb with Xephyr nested in it, D-Bus, AT-SPI, openbox, GTK 3, GTK 4 and
//!   Chromium; the person is played with xdotool on the outer X server. Then a visible takeover
//!   on a fresh desktop. Screenshots go to DIR (default `demo-out/`).
//! - `nish-demo --wayland`: a headless session on a private GNOME Wayland desktop (mutter
//!   --headless --wayland --no-x11, D-Bus, AT-SPI, GTK 3, GTK 4 and Chromium as native Wayland
//!   clients, no X server). The first consent is answered through the test daemon's files, the
//!   later ones on the real consent dialog (a native Wayland client) through mutter's
//!   RemoteDesktop API.
//!
//! A binary of the test crate rather than an example, so that building it needs none of the
//! test crate's dev-dependencies.

use std::path::PathBuf;

use nish_testdesk::session::{
    run_desktop_session, run_desktop_takeover, run_wayland_session, session_desktop,
    takeover_desktop, wayland_session_desktop,
};

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1) {
        Some(a) if a == "--wayland" => wayland(),
        dir => x11(dir
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("demo-out"))),
    }
}

fn x11(out: PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(&out)?;
    let out = out.canonicalize()?;
    println!(
        "starting a private headless desktop (Xvfb with Xephyr nested in it, D-Bus, AT-SPI, \
         openbox) and the apps..."
    );
    let sd = session_desktop()?;
    println!(
        "desktop {} up in {} ms; apps: {}",
        sd.desk.display_name(),
        sd.desk.startup_time().as_millis(),
        sd.apps
            .iter()
            .map(|a| format!("{} (pid {})", a.name, a.pid))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "the person is played by xdotool on the outer X server {} (their real mouse inside the \
         nested desktop); other programs' clicks come through XTEST on the desktop itself\n",
        sd.desk.person_display().unwrap_or_default()
    );
    let o = run_desktop_session(&sd, &out, true)?;
    if !o.status.success() {
        anyhow::bail!("the demo session failed");
    }
    drop(sd);
    println!("\n== a visible takeover, on a fresh desktop (gtk3-widget-factory and Chromium)\n");
    let td = takeover_desktop()?;
    let o = run_desktop_takeover(&td, &out, true)?;
    if !o.status.success() {
        anyhow::bail!("the demo takeover failed");
    }
    let d = out.display();
    println!(
        "\nscreenshots: {d}/consent-dialog.png, {d}/chromium-window.png, {d}/takeover-frame.png, \
         {d}/takeover-paused.png"
    );
    Ok(())
}

fn wayland() -> anyhow::Result<()> {
    println!(
        "starting a private headless GNOME Wayland desktop (mutter headless, D-Bus, AT-SPI) and \
         the apps..."
    );
    let sd = wayland_session_desktop()?;
    println!(
        "Wayland display {} up in {} ms; apps: {}; X servers running: {}",
        sd.desk.wayland_display(),
        sd.desk.startup_time().as_millis(),
        sd.apps
            .iter()
            .map(|a| format!("{} (pid {})", a.name, a.pid))
            .collect::<Vec<_>>()
            .join(", "),
        sd.desk.x_servers().len()
    );
    println!(
        "consent: the test build writes the first request to a private directory and the \
         script answers it; the later ones are clicked on the real dialog\n"
    );
    let o = run_wayland_session(&sd, true)?;
    if !o.status.success() {
        anyhow::bail!("the Wayland demo session failed");
    }
    Ok(())
}
