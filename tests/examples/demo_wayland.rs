//! `scripts/demo.sh --wayland`: a headless nish-driver session on a private GNOME Wayland
//! desktop (mutter --headless --wayland --no-x11, D-Bus, AT-SPI, GTK 3, GTK 4 and Chromium as
//! native Wayland clients, no X server), driven by the official MCP Python client. Consent is
//! answered through the test build's files (the consent dialog is not a Wayland client yet).

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
        "consent: the test build writes each request to a private directory and the script \
         answers it as the person (no consent dialog on Wayland yet)\n"
    );
    let o = run_wayland_session(&sd, true)?;
    if !o.status.success() {
        anyhow::bail!("the Wayland demo session failed");
    }
    Ok(())
}
