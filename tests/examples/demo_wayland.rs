//! `scripts/demo.sh --wayland`: a headless nish-driver session on a private GNOME Wayland
//! desktop (mutter --headless --wayland --no-x11, D-Bus, AT-SPI, GTK 3, GTK 4 and Chromium as
//! native Wayland clients, no X server), driven by the official MCP Python client. The first
//! consent is answered through the test build's files, the later ones on the real consent
//! dialog (a native Wayland client) through mutter's RemoteDesktop API.

use nish_testdesk::session::{run_wayland_session, wayland_session_desktop};

fn main() -> anyhow::Result<()> {
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
